"""Recorded calls replayed under partial evaluation: known equations in the parent trace, recipes
in this one (Flax's ``nn.scan`` runs its body under it).
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

from jaxlsp.worker.tracing.jaxcompat.staged import (
    emit,
    frame_mark,
    own_prefix,
    staged_input,
    staged_since,
)


class PartialSegment(NamedTuple):
    """A call recorded under :func:`partial_trace` (jax's partial evaluation, which Flax's
    ``nn.scan`` runs its body under once to find the loop's invariant outputs): the equations its
    known values staged in the parent trace (as a :class:`Segment`'s, inputs ``("in", i)``: input
    i's known value), the equations of its unknown values, as the partial evaluation's recipes
    (inputs also ``("tin", i)``: input i, unknown; ``("t", j, k)``: output k of recipe j;
    ``("const", spec)``: a known value taken in, ``spec`` a known equation's output or input), and
    its outputs (``("arg", i)``: input i itself, ``("p", spec)``: a known value, ``("t", j, k)``)."""

    known: list[tuple[Any, ...]]
    unknown: list[tuple[Any, ...]]
    outputs: list[tuple[Any, ...]]


def partial_trace() -> Any | None:
    """The current trace when it is jax's partial evaluation (``pe.JaxprTrace``) over a staging
    trace (``make_jaxpr``'s, a scan body's), directly or through a gradient's linearization (whose
    operations on values with no tangent go to its staging trace as they are), else None."""
    try:
        from jax._src import core
        from jax._src import source_info_util as siu
        from jax._src.interpreters import partial_eval as pe

        trace = core.trace_ctx.trace
        if type(trace) is not pe.JaxprTrace or not isinstance(trace.name_stack, siu.NameStack):
            return None
        staging = _known_traces(trace)
        if staging is None or not isinstance(staging[0].frame.tracing_eqns, list):
            return None
        if not isinstance(trace.effect_handles, list):
            return None
        return trace
    except Exception:
        return None


def _known_traces(trace: Any) -> tuple[Any, Any] | None:
    """``(the staging trace a partial evaluation's known values live in, the linearization's tangent
    trace or None)``; None when its parent is neither a staging trace nor a linearization over two."""
    from jax._src.interpreters import ad
    from jax._src.interpreters import partial_eval as pe

    parent = trace.parent_trace
    if type(parent) is pe.DynamicJaxprTrace:
        return parent, None
    if (
        type(parent) is ad.LinearizeTrace
        and type(parent.parent_trace) is pe.DynamicJaxprTrace
        and type(parent.tangent_trace) is pe.DynamicJaxprTrace
    ):
        return parent.parent_trace, parent.tangent_trace
    return None


def partial_input(x: Any, trace: Any) -> tuple[Any, Any, Any, str] | None:
    """``(x, its known value or None, its variable, kind)`` under the partial evaluation
    ``trace``: kind ``"u"`` an unknown value of ``trace`` (its variable ``("u", id)``), ``"k"`` a
    known one whose value is a tracer of the parent trace, ``"p"`` a tracer of the parent trace
    itself; None for another value (a concrete constant, a value of another trace)."""
    try:
        from jax._src.interpreters import partial_eval as pe

        if type(x) is pe.JaxprTracer and x._trace is trace:
            known = x.pval.get_known()
            if known is None:
                if x.aval.has_qdd:
                    return None
                return x, None, ("u", id(x)), "u"
            kind = "k"
        elif type(x) is pe.DynamicJaxprTracer:
            known, kind = x, "p"
        else:
            return None  # a linearization's value with a tangent, a concrete constant, another trace's
        traces = _known_traces(trace)
        staged = None if traces is None else staged_input(known, traces[0])
        if staged is None or staged[0] is not known:
            return None
        return x, known, staged[1], kind
    except Exception:
        return None


def partial_mark(trace: Any) -> tuple[Any, ...]:
    """Where the partial evaluation ``trace`` stands: its known values' staging trace's frame, its
    effects, the id its next recipe gets (drawing one leaves a gap in ids, which only order the
    recipes) and, under a linearization, its tangent trace's frame (which a replay must leave as
    it is)."""
    traces = _known_traces(trace)
    assert traces is not None
    known, tangent = traces
    return (frame_mark(known), len(trace.effect_handles), next(trace.counter), tangent and frame_mark(tangent))


def partial_segment(
    trace: Any,
    mark: tuple[Any, ...],
    inputs: list[tuple[Any, Any, Any, str]],
    outputs: list[Any],
    prefix: tuple[Any, ...],
    own: str | None,
) -> PartialSegment | None:
    """What the partial evaluation ``trace`` did since ``mark`` for a call on ``inputs``
    (:func:`partial_input`'s) giving ``outputs``: the known equations its parent staged and the
    recipes of the unknown outputs, back to the inputs. None when it did anything a replay would
    not repeat (as :func:`segment` says; also an effect, or a recipe reading a value that is no
    input)."""
    try:
        import numpy as np
        from jax._src import core
        from jax._src.interpreters import partial_eval as pe

        traces = _known_traces(trace)
        if traces is None:
            return None
        parent, tangent = traces
        if frame_mark(parent)[1:] != mark[0][1:] or len(trace.effect_handles) != mark[1]:
            return None
        if tangent is not None and frame_mark(tangent) != mark[3]:
            return None  # a value with a tangent met a known one: the linearization staged its part
        named = own_prefix(prefix, own)
        where: dict[Any, tuple[Any, ...]] = {}
        unknown_in: dict[int, tuple[Any, ...]] = {}
        leaves: dict[int, int] = {}
        for i, (leaf, known, var, _) in enumerate(inputs):
            leaves.setdefault(id(leaf), i)
            if known is None:
                unknown_in.setdefault(id(leaf), ("tin", i))
            else:
                where.setdefault(var, ("in", i))
        staged = staged_since(parent.frame, mark[0][0], where, named)
        if staged is None:
            return None
        known_eqns, made = staged
        recipes: dict[int, Any] = {}
        pending = [out for out in outputs if type(out) is pe.JaxprTracer and id(out) not in leaves]
        while pending:
            tracer = pending.pop()
            if id(tracer) in unknown_in:
                continue
            recipe = tracer.recipe
            if type(recipe) is pe.JaxprEqnRecipe:
                if recipe.eqn_id < mark[2]:
                    return None  # computed before the call: a value it reached other than as input
                if recipe.eqn_id not in recipes:
                    recipes[recipe.eqn_id] = recipe
                    pending.extend(recipe.in_tracers)
            elif type(recipe) not in (pe.ConstVar, core.Literal):
                return None
        # a recipe's name stack is the part after the trace's own (jax's default rule) or the
        # whole stack (other rules: a jit's): each is matched and replayed as it was staged
        bases = [(False, [(type(item), item) for item in named[len(trace.name_stack) :]])]
        bases.append((True, [(type(item), item) for item in named]))
        spelled: dict[int, tuple[Any, ...]] = {}
        keep: list[Any] = []  # the outputs spelled, alive while their ids are keys
        unknown: list[tuple[Any, ...]] = []
        for eqn_id in sorted(recipes):
            recipe = recipes[eqn_id]
            if recipe.effects:
                return None
            source = recipe.source_info
            stack = source.name_stack.stack
            whole = None
            for full, typed in bases:
                if len(stack) >= len(typed) and all(
                    type(a) is t and a == b for a, (t, b) in zip(stack, typed, strict=False)
                ):
                    whole, cut = full, len(typed)
            if whole is None:
                return None
            ins: list[tuple[Any, ...]] = []
            for tracer in recipe.in_tracers:
                spec = unknown_in.get(id(tracer)) or spelled.get(id(tracer))
                if spec is not None:
                    ins.append(spec)
                    continue
                inner = tracer.recipe
                if type(inner) is core.Literal:
                    ins.append(("lit", inner))
                    continue
                value = getattr(inner, "val", None)
                if type(inner) is not pe.ConstVar:
                    return None
                if isinstance(value, np.ndarray | np.generic):  # a jit's residual constant (gelu's sqrt(2/pi))
                    ins.append(("array", value))
                    continue
                if type(value) is not pe.DynamicJaxprTracer or value._trace is not parent:
                    return None
                known_spec = _known(value, made, where)
                if known_spec is None:
                    return None
                ins.append(("const", known_spec))
            for k, ref in enumerate(recipe.out_tracer_refs):
                out = ref()
                if out is not None:
                    keep.append(out)
                    spelled[id(out)] = ("t", len(unknown), k)
            suffix = tuple(stack[cut:])
            unknown.append(
                (
                    recipe.primitive,
                    recipe.params,
                    recipe.effects,
                    recipe.ctx,
                    source.traceback,
                    whole,
                    suffix,
                    ins,
                    list(recipe.out_avals),
                )
            )
        outs: list[tuple[Any, ...]] = []
        for out in outputs:
            if id(out) in leaves:
                outs.append(("arg", leaves[id(out)]))
            elif type(out) is pe.DynamicJaxprTracer and out._trace is parent:
                known_spec = _known(out, made, where)
                if known_spec is None:
                    return None
                outs.append(("p", known_spec))
            elif id(out) in spelled:
                outs.append(spelled[id(out)])
            else:
                return None
        return PartialSegment(known_eqns, unknown, outs)
    except Exception:
        return None


def _known(tracer: Any, made: dict[Any, tuple[Any, ...]], where: dict[Any, tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """How a segment spells a tracer of the parent trace: a known equation's output, an input, or
    a literal (jax folds a constant into one); None for another value."""
    from jax._src import core

    atom = tracer.val
    if type(atom) is core.Literal:
        return ("plit", atom)
    if type(atom) is not core.Var:
        return None
    return made.get(atom) or where.get(atom)


def partial_replay(
    trace: Any, seg: PartialSegment, inputs: list[tuple[Any, Any, Any, str]], prefix: tuple[Any, ...], own: str | None
) -> list[Any]:
    """Stage ``seg`` again under the partial evaluation ``trace`` on ``inputs``: its known
    equations in the parent trace, then its recipes, each under the name stack the partial
    evaluation gives it (the part after the trace's own), with its recorded traceback."""
    from jax._src import core
    from jax._src import source_info_util as siu
    from jax._src.interpreters import partial_eval as pe

    named = own_prefix(prefix, own)
    traces = _known_traces(trace)
    assert traces is not None
    parent = traces[0]
    known = emit(parent, seg.known, lambda spec: inputs[spec[1]][1], named)

    literals: dict[int, Any] = {}  # one tracer per recorded literal, as the trace had one

    def value(spec: tuple[Any, ...]) -> Any:
        if spec[0] == "plit":
            tracer = literals.get(id(spec[1]))
            if tracer is None:
                tracer = literals[id(spec[1])] = pe.DynamicJaxprTracer(parent, spec[1].aval, spec[1])
            return tracer
        return inputs[spec[1]][1] if spec[0] == "in" else known[spec[1]][spec[2]]

    arrays: dict[int, Any] = {}  # a copy of each recorded constant: a trace of the call makes its own

    def array(recorded: Any) -> Any:
        copied = arrays.get(id(recorded))
        if copied is None:
            copied = arrays[id(recorded)] = copy.copy(recorded)
        return copied

    unknown = pe.PartialVal.unknown
    bases = (named[len(trace.name_stack) :], named)
    made: list[list[Any]] = []
    for primitive, params, effects, ctx, traceback, whole, suffix, ins, avals in seg.unknown:
        tracers = []
        for spec in ins:
            tag = spec[0]
            if tag == "t":
                tracers.append(made[spec[1]][spec[2]])
            elif tag == "tin":
                tracers.append(inputs[spec[1]][0])
            elif tag == "lit":
                tracers.append(pe.JaxprTracer(trace, unknown(spec[1].aval), spec[1]))
            elif tag == "array":
                const = array(spec[1])
                tracers.append(pe.JaxprTracer(trace, unknown(core.typeof(const)), pe.ConstVar(const)))
            else:
                const = value(spec[1])
                tracers.append(pe.JaxprTracer(trace, unknown(const.aval), pe.ConstVar(const)))
        outs = [pe.JaxprTracer(trace, unknown(aval), None) for aval in avals]
        source = siu.SourceInfo(traceback, siu.NameStack(bases[whole] + suffix))
        recipe = pe.new_eqn_recipe(trace, tracers, outs, primitive, params, effects, source, ctx)
        for out in outs:
            out.recipe = recipe
        made.append(outs)
    result: list[Any] = []
    for spec in seg.outputs:
        if spec[0] == "arg":
            result.append(inputs[spec[1]][0])
        elif spec[0] == "p":
            result.append(value(spec[1]))
        else:
            result.append(made[spec[1]][spec[2]])
    return result
