"""Staged equations recorded and replayed (``worker/reuse/replay.py``): a call's equations held as
data, emitted again under another call's inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias, cast

if TYPE_CHECKING:
    from collections.abc import Set

    from jax._src import core
    from jax._src import source_info_util as siu
    from jax._src.effects import Effect
    from jax._src.interpreters import partial_eval as pe

    #: One item of a name stack (a named scope or a transformation's name).
    NameItem: TypeAlias = siu.Scope | siu.Transform
    #: How a recorded equation (or a call's result) names a value: a literal, the call's i-th
    #: input (``in``, ``arg``; ``pin``, ``tin``, ``lifted``, ``const``: a linearization's), output
    #: k of equation j (``eq``; ``out``: of an earlier range, ``t``: of a recipe), a symbolic zero
    #: of an abstract value, nothing; a partial evaluation's known value ``p``/``const`` wraps one.
    Spec: TypeAlias = (
        tuple[Literal["in", "arg", "pin", "tin", "lifted", "const"], int]
        | tuple[Literal["eq", "out", "t"], int, int]
        | tuple[Literal["lit", "plit"], core.Literal]
        | tuple[Literal["zero"], core.AbstractValue]
        | tuple[Literal["none"]]
    )
    #: A staged equation held as data: ``(primitive, params, effects, ctx, traceback, name stack
    #: after the call's prefix, inputs, output avals)``.
    StagedEqn: TypeAlias = tuple[
        core.Primitive,
        dict[str, object],
        Set[Effect],
        core.JaxprEqnContext,
        object,
        tuple[NameItem, ...],
        list[Spec],
        list[core.AbstractValue],
    ]
    #: Where a staging trace's frame stands (:func:`frame_mark`).
    FrameMark: TypeAlias = tuple[int, int, bool, int, frozenset[Effect]]


class Segment(NamedTuple):
    """The equations one call added to a staging trace, in order, held as data: no tracer of that
    trace, so that holding a segment keeps no equation alive past jax's dead-code elimination.

    ``eqns``: ``(primitive, params, effects, ctx, traceback, name stack after the call's prefix,
    inputs, output avals)``, each input ``("lit", literal)``, ``("in", i)`` (the call's i-th input)
    or ``("eq", j, k)`` (output k of equation j); ``outputs``: the call's results, spelled alike."""

    eqns: list[StagedEqn]
    outputs: list[Spec]


def staging_trace() -> pe.DynamicJaxprTrace | None:
    """The current trace when it is one that stages a jaxpr (``make_jaxpr``'s, a scan body's),
    else None (a JVP, a vmap, eager evaluation, or a jax whose internals moved)."""
    try:
        from jax._src import core
        from jax._src.interpreters import partial_eval as pe

        trace = core.trace_ctx.trace
        if type(trace) is not pe.DynamicJaxprTrace:
            return None
        frame = trace.frame
        if not isinstance(frame.tracing_eqns, list):
            return None
        return trace
    except Exception:
        return None


def staged_input(x: object, trace: pe.DynamicJaxprTrace) -> tuple[pe.DynamicJaxprTracer, core.Var] | None:
    """``(tracer, variable)`` standing for ``x`` in ``trace`` when ``x`` is an unknown value there:
    a tracer of ``trace`` (no literal, no constant: jax folds operations on those), or a tracer of
    an enclosing trace that ``trace`` already took in (a scan body's broadcast operand, which the
    body reads as a constant of its own); else None."""
    try:
        from jax._src import core
        from jax._src.interpreters import partial_eval as pe

        if not isinstance(x, core.Tracer):
            return None
        if type(x) is pe.DynamicJaxprTracer and x._trace is trace:
            atom = x.val
            if type(atom) is not core.Var or atom in trace.frame.constvar_to_val or atom.aval.has_qdd:
                return None
            return x, atom
        inner = trace.frame.constid_to_tracer.get(id(x))  # taken in before: the body's own tracer
        if inner is None or trace.frame.constvar_to_val.get(cast("core.Var", inner.val)) is not x:
            return None
        if inner.val.aval.has_qdd:
            return None
        return inner, cast("core.Var", inner.val)  # a constant taken in: a variable
    except Exception:
        return None


def frame_mark(trace: pe.DynamicJaxprTrace) -> FrameMark:
    """Where ``trace``'s frame stands: equations so far, and what a call must leave as it was to
    be replayed (arguments, effects, mutable state, higher-order types)."""
    frame = trace.frame
    eqns, qdds = len(frame.tracing_eqns), len(frame.mutable_qdds)
    return (eqns, len(frame.invars), frame.is_high, qdds, frozenset(frame.effects))


def staged_since(
    frame: pe.JaxprStackFrame,
    start: int,
    where: dict[core.Var, Spec],
    prefix: tuple[NameItem, ...],
    end: int | None = None,
) -> tuple[list[StagedEqn], dict[core.Var, Spec]] | None:
    """The live equations of ``frame`` from ``start`` on, as data: each input a literal, a value
    ``where`` names, or an output of an earlier one of them; their outputs (``made``). None when
    an equation has an effect, reads any other value, or is staged outside the name stack
    ``prefix`` (compared with its items' types: Scope and Transform are equal named tuples)."""
    import weakref

    from jax._src import core
    from jax._src.interpreters import partial_eval as pe

    cut = len(prefix)
    typed = [(type(item), item) for item in prefix]
    made: dict[core.Var, Spec] = {}
    eqns: list[StagedEqn] = []
    for ref in frame.tracing_eqns[start:end]:
        eqn = ref() if isinstance(ref, weakref.ReferenceType) else ref
        if eqn is None:  # dead already: a trace of the call would have dropped it too
            continue
        if type(eqn) is not pe.TracingEqn or eqn.effects:
            return None
        source = eqn.source_info
        stack = source.name_stack.stack
        if len(stack) < cut or any(type(a) is not t or a != b for a, (t, b) in zip(stack, typed, strict=False)):
            return None
        ins: list[Spec] = []
        for tracer in eqn.in_tracers:
            atom = tracer.val
            if type(atom) is core.Literal:
                ins.append(("lit", atom))
            elif atom in made:
                ins.append(made[atom])
            elif atom in where:
                ins.append(where[atom])
            else:  # a constant, or a value the call reached other than through its inputs
                return None
        for k, var in enumerate(eqn.outvars):
            if var.aval.has_qdd:
                return None
            made[var] = ("eq", len(eqns), k)
        avals = [var.aval for var in eqn.outvars]
        suffix = tuple(stack[cut:])
        eqns.append((eqn.primitive, eqn.params, eqn.effects, eqn.ctx, source.traceback, suffix, ins, avals))
    return eqns, made


def inputs_named(variables: list[core.Var]) -> dict[core.Var, Spec]:
    """Each input variable as a segment spells it, ``("in", i)``: the first input it is."""
    where: dict[core.Var, Spec] = {}
    for i, var in enumerate(variables):
        where.setdefault(var, ("in", i))
    return where


def own_prefix(prefix: tuple[NameItem, ...], own: str | None) -> tuple[NameItem, ...]:
    from jax._src import source_info_util as siu

    return prefix if own is None else (*prefix, siu.Scope(own))


def segment(
    trace: pe.DynamicJaxprTrace,
    mark: FrameMark,
    inputs: list[core.Var],
    outputs: list[object],
    prefix: tuple[NameItem, ...],
    own: str | None = None,
    originals: list[object] | None = None,
) -> Segment | None:
    """The equations ``trace`` staged since ``mark``, as a :class:`Segment` over ``inputs`` (the
    call's input variables) giving ``outputs`` (its result tracers); None when the call did
    anything a replay would not repeat: an effect, a new constant or argument, a read of a value
    that is no input, an equation outside the name stack ``prefix`` (followed by the scope
    ``own``, when given: the call's own, which a replay renames), a result that is no tracer."""
    try:
        from jax._src.interpreters import partial_eval as pe

        frame = trace.frame
        if frame_mark(trace)[1:] != mark[1:]:
            return None
        where = inputs_named(inputs)
        staged = staged_since(frame, mark[0], where, own_prefix(prefix, own))
        if staged is None:
            return None
        eqns, made = staged
        passed = {id(value): i for i, value in reversed(list(enumerate(originals or [])))}
        outs: list[Spec] = []
        for out in outputs:
            if id(out) in passed:  # an input returned as it came (an enclosing trace's value)
                outs.append(("arg", passed[id(out)]))
                continue
            if type(out) is not pe.DynamicJaxprTracer or out._trace is not trace:
                return None
            val = cast("core.Var", out.val)  # a literal is no key: None below
            spec = made.get(val) or where.get(val)
            if spec is None:
                return None
            outs.append(spec)
        return Segment(eqns, outs)
    except Exception:
        return None


def emit(
    trace: pe.DynamicJaxprTrace,
    eqns: list[StagedEqn],
    resolve: Callable[[Spec], object],
    prefix: tuple[NameItem, ...],
    *,
    traceback: object = None,
    stack: siu.NameStack | None = None,
    made: list[list[object]] | None = None,
    before: Callable[[list[list[object]]], None] | None = None,
) -> list[list[object]]:
    """Stage ``eqns`` (a segment's, see :class:`Segment`) in ``trace`` under the name stack
    ``prefix`` (``stack``: the one to use as it is where an equation's suffix is empty), each with
    its recorded traceback or ``traceback``; ``resolve`` gives the tracers of the inputs that are
    no literal and no earlier equation's. The outputs, appended to ``made`` (the caller's, to
    resolve its own specs with), equation by equation; ``before(made)`` runs ahead of each."""
    from jax._src import source_info_util as siu
    from jax._src.interpreters import partial_eval as pe

    made = [] if made is None else made
    # one name stack per scope, as a trace shares one among the equations staged in it (the
    # graph builder places equations by name stack: once each)
    stacks: dict[tuple[NameItem, ...], siu.NameStack] = {} if stack is None else {(): stack}
    for primitive, params, effects, ctx, recorded, suffix, ins, avals in eqns:
        if before is not None:
            before(made)
        named = stacks.get(suffix)
        if named is None:
            named = stacks[suffix] = siu.NameStack(prefix + suffix)
        source = siu.SourceInfo(cast("None", recorded if traceback is None else traceback), named)
        tracers: list[object] = []
        for spec in ins:
            if spec[0] == "eq":
                tracers.append(made[spec[1]][spec[2]])
            elif spec[0] == "lit":
                tracers.append(pe.DynamicJaxprTracer(trace, spec[1].aval, spec[1], source))
            else:
                tracers.append(resolve(spec))
        emit_eqn = cast("Callable[..., list[object]]", trace.emit_eqn)  # unannotated in jax
        made.append(emit_eqn(tracers, avals, primitive, params, effects, source, ctx))
    return made


def replay(
    trace: pe.DynamicJaxprTrace,
    seg: Segment,
    inputs: list[object],
    prefix: tuple[NameItem, ...],
    own: str | None = None,
    originals: list[object] | None = None,
) -> list[object]:
    """Stage ``seg``'s equations again in ``trace`` on ``inputs`` (tracers, in the recorded call's
    order; ``originals``: the values passed, where a segment returns one as it came), under the
    name stack ``prefix`` and the scope ``own`` (when the segment was recorded with one), each with
    its recorded traceback: the equations a trace of the same call would stage. The results, in
    order."""
    made = emit(trace, seg.eqns, lambda spec: inputs[cast("tuple[str, int]", spec)[1]], own_prefix(prefix, own))
    out: list[object] = []
    for spec in seg.outputs:
        if spec[0] == "arg":
            assert originals is not None
            out.append(originals[spec[1]])
        elif spec[0] == "in":
            out.append(inputs[spec[1]])
        else:
            eq = cast("tuple[str, int, int]", spec)
            out.append(made[eq[1]][eq[2]])
    return out
