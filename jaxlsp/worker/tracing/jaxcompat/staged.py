"""Staged equations recorded and replayed (``worker/reuse/replay.py``): a call's equations held as
data, emitted again under another call's inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Segment(NamedTuple):
    """The equations one call added to a staging trace, in order, held as data: no tracer of that
    trace, so that holding a segment keeps no equation alive past jax's dead-code elimination.

    ``eqns``: ``(primitive, params, effects, ctx, traceback, name stack after the call's prefix,
    inputs, output avals)``, each input ``("lit", literal)``, ``("in", i)`` (the call's i-th input)
    or ``("eq", j, k)`` (output k of equation j); ``outputs``: the call's results, spelled alike."""

    eqns: list[tuple[Any, ...]]
    outputs: list[tuple[Any, ...]]


def staging_trace() -> Any | None:
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


def staged_input(x: Any, trace: Any) -> tuple[Any, Any] | None:
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
        if inner is None or trace.frame.constvar_to_val.get(inner.val) is not x or inner.val.aval.has_qdd:
            return None
        return inner, inner.val
    except Exception:
        return None


def frame_mark(trace: Any) -> tuple[Any, ...]:
    """Where ``trace``'s frame stands: equations so far, and what a call must leave as it was to
    be replayed (arguments, effects, mutable state, higher-order types)."""
    frame = trace.frame
    eqns, qdds = len(frame.tracing_eqns), len(frame.mutable_qdds)
    return (eqns, len(frame.invars), frame.is_high, qdds, frozenset(frame.effects))


def staged_since(
    frame: Any, start: int, where: dict[Any, tuple[Any, ...]], prefix: tuple[Any, ...], end: int | None = None
) -> tuple[list[tuple[Any, ...]], dict[Any, tuple[Any, ...]]] | None:
    """The live equations of ``frame`` from ``start`` on, as data: each input a literal, a value
    ``where`` names, or an output of an earlier one of them; their outputs (``made``). None when
    an equation has an effect, reads any other value, or is staged outside the name stack
    ``prefix`` (compared with its items' types: Scope and Transform are equal named tuples)."""
    import weakref

    from jax._src import core
    from jax._src.interpreters import partial_eval as pe

    cut = len(prefix)
    typed = [(type(item), item) for item in prefix]
    made: dict[Any, tuple[Any, ...]] = {}
    eqns: list[tuple[Any, ...]] = []
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
        ins: list[tuple[Any, ...]] = []
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


def inputs_named(variables: list[Any]) -> dict[Any, tuple[Any, ...]]:
    """Each input variable as a segment spells it, ``("in", i)``: the first input it is."""
    where: dict[Any, tuple[Any, ...]] = {}
    for i, var in enumerate(variables):
        where.setdefault(var, ("in", i))
    return where


def own_prefix(prefix: tuple[Any, ...], own: str | None) -> tuple[Any, ...]:
    from jax._src import source_info_util as siu

    return prefix if own is None else (*prefix, siu.Scope(own))


def segment(
    trace: Any,
    mark: tuple[Any, ...],
    inputs: list[Any],
    outputs: list[Any],
    prefix: tuple[Any, ...],
    own: str | None = None,
    originals: list[Any] | None = None,
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
        outs: list[tuple[Any, ...]] = []
        for out in outputs:
            if id(out) in passed:  # an input returned as it came (an enclosing trace's value)
                outs.append(("arg", passed[id(out)]))
                continue
            if type(out) is not pe.DynamicJaxprTracer or out._trace is not trace:
                return None
            spec = made.get(out.val) or where.get(out.val)
            if spec is None:
                return None
            outs.append(spec)
        return Segment(eqns, outs)
    except Exception:
        return None


def emit(
    trace: Any,
    eqns: list[tuple[Any, ...]],
    resolve: Callable[[tuple[Any, ...]], Any],
    prefix: tuple[Any, ...],
    *,
    traceback: Any = None,
    stack: Any = None,
    made: list[list[Any]] | None = None,
    before: Callable[[list[list[Any]]], None] | None = None,
) -> list[list[Any]]:
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
    stacks: dict[tuple[Any, ...], Any] = {} if stack is None else {(): stack}
    for primitive, params, effects, ctx, recorded, suffix, ins, avals in eqns:
        if before is not None:
            before(made)
        named = stacks.get(suffix)
        if named is None:
            named = stacks[suffix] = siu.NameStack(prefix + suffix)
        source = siu.SourceInfo(recorded if traceback is None else traceback, named)
        tracers = []
        for spec in ins:
            if spec[0] == "eq":
                tracers.append(made[spec[1]][spec[2]])
            elif spec[0] == "lit":
                tracers.append(pe.DynamicJaxprTracer(trace, spec[1].aval, spec[1], source))
            else:
                tracers.append(resolve(spec))
        made.append(trace.emit_eqn(tracers, avals, primitive, params, effects, source, ctx))
    return made


def replay(
    trace: Any,
    seg: Segment,
    inputs: list[Any],
    prefix: tuple[Any, ...],
    own: str | None = None,
    originals: list[Any] | None = None,
) -> list[Any]:
    """Stage ``seg``'s equations again in ``trace`` on ``inputs`` (tracers, in the recorded call's
    order; ``originals``: the values passed, where a segment returns one as it came), under the
    name stack ``prefix`` and the scope ``own`` (when the segment was recorded with one), each with
    its recorded traceback: the equations a trace of the same call would stage. The results, in
    order."""
    made = emit(trace, seg.eqns, lambda spec: inputs[spec[1]], own_prefix(prefix, own))
    out: list[Any] = []
    for spec in seg.outputs:
        if spec[0] == "arg":
            assert originals is not None
            out.append(originals[spec[1]])
        else:
            out.append(inputs[spec[1]] if spec[0] == "in" else made[spec[1]][spec[2]])
    return out
