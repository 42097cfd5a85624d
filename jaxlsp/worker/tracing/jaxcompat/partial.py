"""Recorded calls replayed under partial evaluation: known equations in the parent trace, recipes
in this one (Flax's ``nn.scan`` runs its body under it).
"""

from __future__ import annotations

import copy
from collections.abc import Set
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias, cast

from jaxlsp.worker.tracing.jaxcompat.staged import (
    emit,
    frame_mark,
    own_prefix,
    staged_input,
    staged_since,
)

if TYPE_CHECKING:
    import numpy as np
    from jax._src import core
    from jax._src.effects import Effect
    from jax._src.interpreters import partial_eval as pe

    from jaxlsp.worker.tracing.jaxcompat.staged import FrameMark, NameItem, Spec, StagedEqn

    #: :func:`partial_input`'s: ``(x, its known value or None, its variable, kind)``.
    PartialInput: TypeAlias = tuple[object, object, "core.Var | tuple[str, int]", str]
    #: :func:`partial_mark`'s: the known trace's mark, effects, next recipe id, the tangent trace's mark.
    PartialMark: TypeAlias = tuple[FrameMark, int, int, FrameMark | None]
    #: A recipe's input: input i unknown, output k of recipe j, a literal, a constant array, a
    #: known value (spelled as a known equation spells it).
    RecipeSpec: TypeAlias = (
        tuple[Literal["tin"], int]
        | tuple[Literal["t"], int, int]
        | tuple[Literal["lit"], core.Literal]
        | tuple[Literal["array"], np.ndarray | np.generic]
        | tuple[Literal["const"], Spec]
    )
    #: A partial segment's output: input i itself, a known value, output k of recipe j.
    OutSpec: TypeAlias = tuple[Literal["arg"], int] | tuple[Literal["p"], Spec] | tuple[Literal["t"], int, int]
    #: A recipe held as data: ``(primitive, params, effects, ctx, traceback, its name stack is the
    #: whole stack, name stack after the base, inputs, output avals)``.
    RecipeEqn: TypeAlias = tuple[
        core.Primitive,
        dict[str, object],
        Set[Effect],
        core.JaxprEqnContext,
        object,
        bool,
        tuple[NameItem, ...],
        list[RecipeSpec],
        list[core.AbstractValue],
    ]


class PartialSegment(NamedTuple):
    """A call recorded under :func:`partial_trace` (jax's partial evaluation, which Flax's
    ``nn.scan`` runs its body under once to find the loop's invariant outputs): the equations its
    known values staged in the parent trace (as a :class:`Segment`'s, inputs ``("in", i)``: input
    i's known value), the equations of its unknown values, as the partial evaluation's recipes
    (inputs also ``("tin", i)``: input i, unknown; ``("t", j, k)``: output k of recipe j;
    ``("const", spec)``: a known value taken in, ``spec`` a known equation's output or input), and
    its outputs (``("arg", i)``: input i itself, ``("p", spec)``: a known value, ``("t", j, k)``)."""

    known: list[StagedEqn]
    unknown: list[RecipeEqn]
    outputs: list[OutSpec]


def partial_trace() -> pe.JaxprTrace | None:
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


def _known_traces(trace: pe.JaxprTrace) -> tuple[pe.DynamicJaxprTrace, pe.DynamicJaxprTrace | None] | None:
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


def partial_input(x: object, trace: pe.JaxprTrace) -> PartialInput | None:
    """``(x, its known value or None, its variable, kind)`` under the partial evaluation
    ``trace``: kind ``"u"`` an unknown value of ``trace`` (its variable ``("u", id)``), ``"k"`` a
    known one whose value is a tracer of the parent trace, ``"p"`` a tracer of the parent trace
    itself; None for another value (a concrete constant, a value of another trace)."""
    try:
        from jax._src.interpreters import partial_eval as pe

        known: object
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


def partial_mark(trace: pe.JaxprTrace) -> PartialMark:
    """Where the partial evaluation ``trace`` stands: its known values' staging trace's frame, its
    effects, the id its next recipe gets (drawing one leaves a gap in ids, which only order the
    recipes) and, under a linearization, its tangent trace's frame (which a replay must leave as
    it is)."""
    traces = _known_traces(trace)
    assert traces is not None
    known, tangent = traces
    return (
        frame_mark(known),
        len(trace.effect_handles),
        next(trace.counter),
        cast("FrameMark | None", tangent and frame_mark(tangent)),
    )


def partial_segment(
    trace: pe.JaxprTrace,
    mark: PartialMark,
    inputs: list[PartialInput],
    outputs: list[object],
    prefix: tuple[NameItem, ...],
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
        where: dict[core.Var, Spec] = {}
        unknown_in: dict[int, tuple[Literal["tin"], int]] = {}
        leaves: dict[int, int] = {}
        for i, (leaf, known, var, _) in enumerate(inputs):
            leaves.setdefault(id(leaf), i)
            if known is None:
                unknown_in.setdefault(id(leaf), ("tin", i))
            else:
                where.setdefault(cast("core.Var", var), ("in", i))  # a known value's: a variable
        staged = staged_since(parent.frame, mark[0][0], where, named)
        if staged is None:
            return None
        known_eqns, made = staged
        recipes: dict[int, pe.JaxprEqnRecipe] = {}
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
        spelled: dict[int, tuple[Literal["t"], int, int]] = {}
        keep: list[object] = []  # the outputs spelled, alive while their ids are keys
        unknown: list[RecipeEqn] = []
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
            ins: list[RecipeSpec] = []
            for tracer in recipe.in_tracers:
                spec: RecipeSpec | None = unknown_in.get(id(tracer)) or spelled.get(id(tracer))
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
                live = ref()
                if live is not None:
                    keep.append(live)
                    spelled[id(live)] = ("t", len(unknown), k)
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
        outs: list[OutSpec] = []
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


def _known(tracer: pe.DynamicJaxprTracer, made: dict[core.Var, Spec], where: dict[core.Var, Spec]) -> Spec | None:
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
    trace: pe.JaxprTrace, seg: PartialSegment, inputs: list[PartialInput], prefix: tuple[NameItem, ...], own: str | None
) -> list[object]:
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
    known = emit(parent, seg.known, lambda spec: inputs[cast("tuple[str, int]", spec)[1]][1], named)

    literals: dict[int, pe.DynamicJaxprTracer] = {}  # one tracer per recorded literal, as the trace had one

    def value(spec: Spec) -> object:
        if spec[0] == "plit":
            tracer = literals.get(id(spec[1]))
            if tracer is None:
                tracer = literals[id(spec[1])] = pe.DynamicJaxprTracer(parent, spec[1].aval, spec[1])
            return tracer
        if spec[0] == "in":
            return inputs[spec[1]][1]
        eq = cast("tuple[str, int, int]", spec)  # ("eq", j, k)
        return known[eq[1]][eq[2]]

    arrays: dict[
        int, np.ndarray | np.generic
    ] = {}  # a copy of each recorded constant: a trace of the call makes its own

    def array(recorded: np.ndarray | np.generic) -> np.ndarray | np.generic:
        copied = arrays.get(id(recorded))
        if copied is None:
            copied = arrays[id(recorded)] = copy.copy(recorded)
        return copied

    unknown = pe.PartialVal.unknown
    bases = (named[len(trace.name_stack) :], named)
    made: list[list[pe.JaxprTracer]] = []
    for primitive, params, effects, ctx, traceback, whole, suffix, ins, avals in seg.unknown:
        tracers: list[object] = []
        for spec in ins:
            if spec[0] == "t":
                tracers.append(made[spec[1]][spec[2]])
            elif spec[0] == "tin":
                tracers.append(inputs[spec[1]][0])
            elif spec[0] == "lit":
                tracers.append(pe.JaxprTracer(trace, unknown(spec[1].aval), spec[1]))
            elif spec[0] == "array":
                copied = array(spec[1])
                tracers.append(pe.JaxprTracer(trace, unknown(core.typeof(copied)), pe.ConstVar(copied)))
            else:
                const = cast("pe.DynamicJaxprTracer", value(spec[1]))  # a tracer of the parent trace
                tracers.append(pe.JaxprTracer(trace, unknown(const.aval), pe.ConstVar(const)))
        outs = [pe.JaxprTracer(trace, unknown(aval), None) for aval in avals]
        source = siu.SourceInfo(traceback, siu.NameStack(bases[whole] + suffix))
        recipe = pe.new_eqn_recipe(
            trace, cast("list[pe.JaxprTracer]", tracers), outs, primitive, params, effects, source, ctx
        )
        for out in outs:
            out.recipe = recipe
        made.append(outs)
    result: list[object] = []
    for out_spec in seg.outputs:
        if out_spec[0] == "arg":
            result.append(inputs[out_spec[1]][0])
        elif out_spec[0] == "p":
            result.append(value(out_spec[1]))
        else:
            result.append(made[out_spec[1]][out_spec[2]])
    return result
