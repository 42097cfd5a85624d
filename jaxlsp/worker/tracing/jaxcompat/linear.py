"""Recorded calls replayed under a gradient: JAX's direct linearization over two staging traces."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, cast

from jaxlsp.worker.tracing.jaxcompat.staged import (
    emit,
    frame_mark,
    inputs_named,
    own_prefix,
    staged_input,
    staged_since,
)

if TYPE_CHECKING:
    from jax._src import core
    from jax._src.interpreters import ad
    from jax._src.interpreters import partial_eval as pe

    from jaxlsp.worker.tracing.jaxcompat.staged import FrameMark, NameItem, Spec, StagedEqn

    #: :func:`linearized_input`'s: ``(primal, its variable, tangent or None, its variable or None,
    #: primal already taken in by the tangent trace)``.
    LinearInput: TypeAlias = tuple[pe.DynamicJaxprTracer, core.Var, pe.DynamicJaxprTracer | None, core.Var | None, bool]
    #: :func:`linear_mark`'s: both frames' marks and the tangent trace's constants so far.
    LinearMark: TypeAlias = tuple[FrameMark, FrameMark, set[core.Var]]


class LinearSegment(NamedTuple):
    """A call recorded under :func:`linearize_trace`: the equations it staged in the primal trace
    (as a :class:`Segment`'s), the residuals the tangent trace took in during the call, in order
    (each ``("pin", i)``: input i's primal, or ``("eq", j, k)``: a primal equation's output), the
    tangent equations (their inputs also ``("tin", i)``: input i's tangent, ``("lifted", i)``: input
    i's primal taken in before the call, ``("const", c)``: residual c), and per output its primal
    and tangent (None: a symbolic zero, the output is its primal alone)."""

    primal: list[StagedEqn]
    residuals: list[Spec]
    tangent: list[StagedEqn]
    outputs: list[tuple[Spec, Spec | None]]


def _staging(trace: ad.LinearizeTrace) -> tuple[pe.DynamicJaxprTrace, pe.DynamicJaxprTrace]:
    """The primal and tangent traces, staging traces both (:func:`linearize_trace` checked)."""
    return cast("pe.DynamicJaxprTrace", trace.parent_trace), cast("pe.DynamicJaxprTrace", trace.tangent_trace)


def linearize_trace() -> ad.LinearizeTrace | None:
    """The current trace when it is jax's direct linearization (a gradient's forward pass) with a
    staging trace for the primal values (``make_jaxpr``'s) and one for the tangents, else None."""
    try:
        from jax._src import core
        from jax._src.interpreters import ad
        from jax._src.interpreters import partial_eval as pe

        trace = core.trace_ctx.trace
        if type(trace) is not ad.LinearizeTrace or not isinstance(trace._name_stack_prefix_len, int):
            return None
        if (
            type(trace.parent_trace) is not pe.DynamicJaxprTrace
            or type(trace.tangent_trace) is not pe.DynamicJaxprTrace
        ):
            return None
        return trace
    except Exception:
        return None


def linearized_input(x: object, trace: ad.LinearizeTrace) -> LinearInput | None:
    """``(primal, its variable, tangent or None, its variable or None, primal already taken in by
    the tangent trace)`` of ``x`` under the linearization ``trace``; None when ``x`` is no such
    value (a constant, another trace's, a symbolic zero that is no primal)."""
    try:
        from jax._src.interpreters import ad

        parent, tangent_trace = _staging(trace)
        primal: object
        tangent: object
        if type(x) is ad.LinearizeTracer and x._trace is trace:
            primal, tangent = x.primal, x.tangent
            if type(tangent) is getattr(ad, "Zero", None):  # a symbolic zero: no tangent to stand for
                return None
        else:
            primal, tangent = x, None
        staged = staged_input(primal, parent)
        if staged is None or staged[0] is not primal:
            return None
        tangent_var = None
        if tangent is not None:
            inner = staged_input(tangent, tangent_trace)
            if inner is None or inner[0] is not tangent:
                return None
            tangent_var = inner[1]
        lifted = id(primal) in tangent_trace.frame.constid_to_tracer
        # ``staged[0] is primal``, ``inner[0] is tangent``: the tracers as the traces hold them
        return staged[0], staged[1], tangent, tangent_var, lifted
    except Exception:
        return None


def linear_mark(trace: ad.LinearizeTrace) -> LinearMark:
    parent, tangent = _staging(trace)
    return (frame_mark(parent), frame_mark(tangent), set(tangent.frame.constvar_to_val))


def tangent_prefix(trace: ad.LinearizeTrace) -> tuple[NameItem, ...]:
    """The name stack a tangent equation staged now gets: the part after the linearization's start."""
    from jax._src import source_info_util as siu

    return tuple(siu.current_name_stack().stack)[trace._name_stack_prefix_len :]


def linear_segment(
    trace: ad.LinearizeTrace,
    mark: LinearMark,
    inputs: list[LinearInput],
    outputs: list[object],
    prefix: tuple[NameItem, ...],
    tangents: tuple[NameItem, ...],
    own: str | None,
) -> LinearSegment | None:
    """What ``trace`` (a :func:`linearize_trace`) staged in its two traces since ``mark``, over
    ``inputs`` (:func:`linearized_input`'s) giving ``outputs``, its primal equations under the name
    stack ``prefix`` and its tangent ones under ``tangents`` (:func:`tangent_prefix`), each then
    under ``own``; None when anything was staged that a replay would not repeat (as
    :func:`segment` says, in either trace)."""
    try:
        from jax._src.interpreters import ad

        parent, tangent = _staging(trace)
        if frame_mark(parent)[1:] != mark[0][1:] or frame_mark(tangent)[1:] != mark[1][1:]:
            return None
        where = inputs_named([var for _, var, _, _, _ in inputs])
        staged = staged_since(parent.frame, mark[0][0], where, own_prefix(prefix, own))
        if staged is None:
            return None
        primal, made = staged
        before = mark[2]
        residuals: list[Spec] = []
        where_t: dict[core.Var, Spec] = {}
        for i, (_, _, _, tangent_var, _) in enumerate(inputs):
            if tangent_var is not None:
                where_t.setdefault(tangent_var, ("tin", i))
        lifted_before: dict[core.Var, Spec] = {}
        for i, (leaf, _, _, _, lifted) in enumerate(inputs):
            if lifted:
                # a constant taken in: a variable
                lifted_before.setdefault(cast("core.Var", tangent.frame.constid_to_tracer[id(leaf)].val), ("lifted", i))
        for constvar, value in tangent.frame.constvar_to_val.items():
            if constvar in before:
                if constvar in lifted_before:
                    where_t[constvar] = lifted_before[constvar]
                continue
            val = cast("core.Var", getattr(value, "val", None))  # None, a literal: no key
            source = made.get(val) or where.get(val)
            if source is None or getattr(value, "_trace", None) is not parent:
                return None
            where_t[constvar] = ("const", len(residuals))
            residuals.append(("pin", source[1]) if source[0] == "in" else source)
        staged_t = staged_since(tangent.frame, mark[1][0], where_t, own_prefix(tangents, own))
        if staged_t is None:
            return None
        tangent_eqns, made_t = staged_t
        outs: list[tuple[Spec, Spec | None]] = []
        for out in outputs:
            p: object
            if type(out) is ad.LinearizeTracer and out._trace is trace:
                p, t = out.primal, out.tangent
                t_val = cast("core.Var", getattr(t, "val", None))  # None, a literal: no key
                t_spec = made_t.get(t_val) or where_t.get(t_val)
                if t_spec is None or t_spec[0] in ("const", "lifted") or getattr(t, "_trace", None) is not tangent:
                    return None
            else:
                p, t_spec = out, None
            if getattr(p, "_trace", None) is not parent:
                return None
            p_val = cast("core.Var", cast("pe.DynamicJaxprTracer", p).val)  # the parent's; a literal: no key
            p_spec = made.get(p_val) or where.get(p_val)
            if p_spec is None:
                return None
            outs.append((p_spec, t_spec))
        return LinearSegment(primal, residuals, tangent_eqns, outs)
    except Exception:
        return None


def staging_context() -> tuple[object, ...] | None:
    """What the staged equations of a call depend on besides the call itself and its name stack:
    jax's trace context (its configuration), the equation context and the Python call stack above
    (code and instruction of every frame: the equations' tracebacks). None when unknown."""
    try:
        from jax._src import config, core
        from jax._src import source_info_util as siu

        # the traceback equations staged now get (a jax user_context's, when one is set)
        return (config.trace_context(), core.current_jaxpr_eqn_context(), siu.current().traceback)
    except Exception:
        return None


def current_name_stack() -> tuple[NameItem, ...] | None:
    """The items of the name stack equations staged now get (None when unknown)."""
    try:
        from jax._src import source_info_util as siu

        return tuple(siu.current_name_stack().stack)
    except Exception:
        return None


def linear_replay(
    trace: ad.LinearizeTrace,
    seg: LinearSegment,
    inputs: list[LinearInput],
    prefix: tuple[NameItem, ...],
    tangents: tuple[NameItem, ...],
    own: str | None,
) -> list[object]:
    """Stage ``seg`` again under the linearization ``trace`` on ``inputs``: its primal equations,
    the tangent trace's residuals in their order, its tangent equations; the results as a trace of
    the call gives them (a primal and tangent pair, or a primal alone)."""
    from jax._src import source_info_util as siu
    from jax._src.interpreters import ad

    pair = cast("Callable[..., object]", ad.LinearizeTracer)
    parent, tangent = _staging(trace)
    primal = emit(parent, seg.primal, lambda spec: inputs[cast("tuple[str, int]", spec)[1]][0], own_prefix(prefix, own))

    def value(spec: Spec) -> object:
        if spec[0] == "in" or spec[0] == "pin":
            return inputs[spec[1]][0]
        eq = cast("tuple[str, int, int]", spec)  # ("eq", j, k)
        return primal[eq[1]][eq[2]]

    source = siu.current()
    residuals: list[object] = [tangent.new_const(value(spec), source) for spec in seg.residuals]

    def resolve(spec: Spec) -> object:
        if spec[0] == "tin":
            return inputs[spec[1]][2]
        if spec[0] == "lifted":
            return tangent.frame.constid_to_tracer[id(inputs[spec[1]][0])]
        return residuals[cast("tuple[str, int]", spec)[1]]  # ("const", c)

    made = emit(tangent, seg.tangent, resolve, own_prefix(tangents, own))
    out: list[object] = []
    for p_spec, t_spec in seg.outputs:
        if t_spec is None:
            out.append(value(p_spec))
        else:
            t = made[t_spec[1]][t_spec[2]] if t_spec[0] == "eq" else resolve(t_spec)
            out.append(pair(trace, value(p_spec), t))
    return out
