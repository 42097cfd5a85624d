"""Recorded calls replayed under a gradient: JAX's direct linearization over two staging traces."""

from __future__ import annotations

from typing import Any, NamedTuple

from jaxlsp.worker.tracing.jaxcompat.staged import (
    emit,
    frame_mark,
    inputs_named,
    own_prefix,
    staged_input,
    staged_since,
)


class LinearSegment(NamedTuple):
    """A call recorded under :func:`linearize_trace`: the equations it staged in the primal trace
    (as a :class:`Segment`'s), the residuals the tangent trace took in during the call, in order
    (each ``("pin", i)``: input i's primal, or ``("eq", j, k)``: a primal equation's output), the
    tangent equations (their inputs also ``("tin", i)``: input i's tangent, ``("lifted", i)``: input
    i's primal taken in before the call, ``("const", c)``: residual c), and per output its primal
    and tangent (None: a symbolic zero, the output is its primal alone)."""

    primal: list[tuple[Any, ...]]
    residuals: list[tuple[Any, ...]]
    tangent: list[tuple[Any, ...]]
    outputs: list[tuple[tuple[Any, ...], tuple[Any, ...] | None]]


def linearize_trace() -> Any | None:
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


def linearized_input(x: Any, trace: Any) -> tuple[Any, Any, Any, Any, bool] | None:
    """``(primal, its variable, tangent or None, its variable or None, primal already taken in by
    the tangent trace)`` of ``x`` under the linearization ``trace``; None when ``x`` is no such
    value (a constant, another trace's, a symbolic zero that is no primal)."""
    try:
        from jax._src.interpreters import ad

        if type(x) is ad.LinearizeTracer and x._trace is trace:
            primal, tangent = x.primal, x.tangent
            if type(tangent) is getattr(ad, "Zero", None):  # a symbolic zero: no tangent to stand for
                return None
        else:
            primal, tangent = x, None
        staged = staged_input(primal, trace.parent_trace)
        if staged is None or staged[0] is not primal:
            return None
        tangent_var = None
        if tangent is not None:
            inner = staged_input(tangent, trace.tangent_trace)
            if inner is None or inner[0] is not tangent:
                return None
            tangent_var = inner[1]
        lifted = id(primal) in trace.tangent_trace.frame.constid_to_tracer
        return primal, staged[1], tangent, tangent_var, lifted
    except Exception:
        return None


def linear_mark(trace: Any) -> tuple[Any, ...]:
    tangent = trace.tangent_trace
    return (frame_mark(trace.parent_trace), frame_mark(tangent), set(tangent.frame.constvar_to_val))


def tangent_prefix(trace: Any) -> tuple[Any, ...]:
    """The name stack a tangent equation staged now gets: the part after the linearization's start."""
    from jax._src import source_info_util as siu

    return tuple(siu.current_name_stack().stack)[trace._name_stack_prefix_len :]


def linear_segment(
    trace: Any,
    mark: tuple[Any, ...],
    inputs: list[tuple[Any, Any, Any, Any, bool]],
    outputs: list[Any],
    prefix: tuple[Any, ...],
    tangents: tuple[Any, ...],
    own: str | None,
) -> LinearSegment | None:
    """What ``trace`` (a :func:`linearize_trace`) staged in its two traces since ``mark``, over
    ``inputs`` (:func:`linearized_input`'s) giving ``outputs``, its primal equations under the name
    stack ``prefix`` and its tangent ones under ``tangents`` (:func:`tangent_prefix`), each then
    under ``own``; None when anything was staged that a replay would not repeat (as
    :func:`segment` says, in either trace)."""
    try:
        from jax._src.interpreters import ad

        parent, tangent = trace.parent_trace, trace.tangent_trace
        if frame_mark(parent)[1:] != mark[0][1:] or frame_mark(tangent)[1:] != mark[1][1:]:
            return None
        where = inputs_named([var for _, var, _, _, _ in inputs])
        staged = staged_since(parent.frame, mark[0][0], where, own_prefix(prefix, own))
        if staged is None:
            return None
        primal, made = staged
        before = mark[2]
        residuals: list[tuple[Any, ...]] = []
        where_t: dict[Any, tuple[Any, ...]] = {}
        for i, (_, _, _, tangent_var, _) in enumerate(inputs):
            if tangent_var is not None:
                where_t.setdefault(tangent_var, ("tin", i))
        lifted_before: dict[Any, tuple[Any, ...]] = {}
        for i, (p, _, _, _, lifted) in enumerate(inputs):
            if lifted:
                lifted_before.setdefault(tangent.frame.constid_to_tracer[id(p)].val, ("lifted", i))
        for constvar, value in tangent.frame.constvar_to_val.items():
            if constvar in before:
                if constvar in lifted_before:
                    where_t[constvar] = lifted_before[constvar]
                continue
            source = made.get(getattr(value, "val", None)) or where.get(getattr(value, "val", None))
            if source is None or getattr(value, "_trace", None) is not parent:
                return None
            where_t[constvar] = ("const", len(residuals))
            residuals.append(("pin", source[1]) if source[0] == "in" else source)
        staged_t = staged_since(tangent.frame, mark[1][0], where_t, own_prefix(tangents, own))
        if staged_t is None:
            return None
        tangent_eqns, made_t = staged_t
        outs: list[tuple[tuple[Any, ...], tuple[Any, ...] | None]] = []
        for out in outputs:
            if type(out) is ad.LinearizeTracer and out._trace is trace:
                p, t = out.primal, out.tangent
                t_spec = made_t.get(getattr(t, "val", None)) or where_t.get(getattr(t, "val", None))
                if t_spec is None or t_spec[0] in ("const", "lifted") or getattr(t, "_trace", None) is not tangent:
                    return None
            else:
                p, t_spec = out, None
            if getattr(p, "_trace", None) is not parent:
                return None
            p_spec = made.get(p.val) or where.get(p.val)
            if p_spec is None:
                return None
            outs.append((p_spec, t_spec))
        return LinearSegment(primal, residuals, tangent_eqns, outs)
    except Exception:
        return None


def staging_context() -> tuple[Any, ...] | None:
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


def current_name_stack() -> tuple[Any, ...] | None:
    """The items of the name stack equations staged now get (None when unknown)."""
    try:
        from jax._src import source_info_util as siu

        return tuple(siu.current_name_stack().stack)
    except Exception:
        return None


def linear_replay(
    trace: Any,
    seg: LinearSegment,
    inputs: list[tuple[Any, Any, Any, Any, bool]],
    prefix: tuple[Any, ...],
    tangents: tuple[Any, ...],
    own: str | None,
) -> list[Any]:
    """Stage ``seg`` again under the linearization ``trace`` on ``inputs``: its primal equations,
    the tangent trace's residuals in their order, its tangent equations; the results as a trace of
    the call gives them (a primal and tangent pair, or a primal alone)."""
    from jax._src import source_info_util as siu
    from jax._src.interpreters import ad

    pair: Any = ad.LinearizeTracer
    parent, tangent = trace.parent_trace, trace.tangent_trace
    primal = emit(parent, seg.primal, lambda spec: inputs[spec[1]][0], own_prefix(prefix, own))

    def value(spec: tuple[Any, ...]) -> Any:
        return inputs[spec[1]][0] if spec[0] in ("in", "pin") else primal[spec[1]][spec[2]]

    source = siu.current()
    residuals = [tangent.new_const(value(spec), source) for spec in seg.residuals]

    def resolve(spec: tuple[Any, ...]) -> Any:
        if spec[0] == "tin":
            return inputs[spec[1]][2]
        if spec[0] == "lifted":
            return tangent.frame.constid_to_tracer[id(inputs[spec[1]][0])]
        return residuals[spec[1]]

    made = emit(tangent, seg.tangent, resolve, own_prefix(tangents, own))
    out: list[Any] = []
    for p_spec, t_spec in seg.outputs:
        if t_spec is None:
            out.append(value(p_spec))
        else:
            t = made[t_spec[1]][t_spec[2]] if t_spec[0] == "eq" else resolve(t_spec)
            out.append(pair(trace, value(p_spec), t))
    return out
