"""Transposition rules memoised: a gradient's backward pass over repeated layers replays the
equations one call staged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, cast

from jaxlsp.worker.tracing.jaxcompat.staged import (
    emit,
    frame_mark,
    staged_since,
    staging_trace,
)

if TYPE_CHECKING:
    from jax._src import core
    from jax._src import source_info_util as siu
    from jax._src.ad_util import Zero
    from jax._src.interpreters import ad
    from jax._src.interpreters import partial_eval as pe

    from jaxlsp.worker.tracing.jaxcompat.staged import FrameMark, Spec, StagedEqn

    #: A rule call's key: primitive, fancy, its values' types and aliases, params by identity,
    #: the trace and equation contexts (hashable, compared by value).
    Key: TypeAlias = tuple[object, ...]


class _Transposed(NamedTuple):
    """What one transposition rule call staged: its equations (as a :class:`Segment`'s, under the
    name stack and traceback current when it ran, which a replay takes from its own call), the
    accumulations it made between them (``(equations before it, argument, cotangent spec)``), and
    its result (a rule's cotangents, or None)."""

    eqns: list[StagedEqn]
    accums: list[tuple[int, int, Spec]]
    result: list[Spec] | None


_SEEN_ONCE = object()


class TransposeMemo:
    """jax's transposition rules (``ad.fancy_transposes``, ``ad.primitive_transposes``), each call
    recorded the second time its key is seen and replayed from the third on.

    A gradient's backward pass runs a rule per linear equation: half of a gradient's trace. Under
    worker/reuse/replay.py the tangent equations of repeated layers share their params (one dict per
    kind of layer), and a rule given the same primitive, params, argument and cotangent types and
    contexts stages the same equations: those are staged again without running the rule, under
    the name stack and traceback jax's backward pass sets for the equation it transposes, with the
    accumulations into the arguments' cotangents made in their order by jax's own accumulators
    (which add the cotangents that meet there). The key holds every param by identity (kept alive
    here), so two programs' equations never share an entry; a rule call that stages a constant,
    an effect or anything a replay would not repeat is never replayed."""

    def __init__(self) -> None:
        # _SEEN_ONCE: recorded the next time; None: never replayed
        self.entries: dict[Key, _Transposed | object | None] = {}
        self.replayed = 0
        self._keep: list[dict[str, object]] = []  # the params keyed by identity, alive as long as their keys
        # Zero, UndefinedPrimal, ValAccum, NullAccum, DynamicJaxprTracer, Var
        self._types: tuple[type, ...] = ()

    @contextlib.contextmanager
    def installed(self) -> Iterator[TransposeMemo]:
        """Within the block, jax's transposition rules go through this memo."""
        try:
            from jax._src import config, core
            from jax._src.ad_util import Zero
            from jax._src.interpreters import ad
            from jax._src.interpreters import partial_eval as pe

            tables = [(ad.fancy_transposes, True), (ad.primitive_transposes, False)]
            self._types = (Zero, ad.UndefinedPrimal, ad.ValAccum, ad.NullAccum, pe.DynamicJaxprTracer, core.Var)
            self._contexts = (config.trace_context, core.current_jaxpr_eqn_context)
            proxy = _accum_proxy()
        except Exception:
            yield self
            return
        wrapped: list[
            tuple[
                dict[core.Primitive, Callable[..., object]],
                core.Primitive,
                Callable[..., object],
                Callable[..., object],
            ]
        ] = []
        for table, fancy in tables:
            for primitive, rule in list(table.items()):
                if getattr(primitive, "call_primitive", False) and not fancy:
                    continue  # called with another signature (params, call_jaxpr, ...)
                wrapper = self._wrap(primitive, rule, fancy, proxy)
                table[primitive] = wrapper
                wrapped.append((table, primitive, rule, wrapper))
        try:
            yield self
        finally:
            for table, primitive, rule, wrapper in wrapped:
                if table.get(primitive) is wrapper:  # a rule registered meanwhile stays
                    table[primitive] = rule

    def _wrap(
        self, primitive: core.Primitive, rule: Callable[..., object], fancy: bool, proxy: type[ad.ValAccum]
    ) -> Callable[..., object]:
        def transpose(cts_in: object, *args: object, **params: object) -> object:
            trace = staging_trace()
            key, inputs = (None, []) if trace is None else self._key(primitive, fancy, trace, cts_in, args, params)
            entry = None if key is None else self.entries.get(key)
            if entry is None or key is None:  # never replayed, or seen the first time
                if key is not None and key not in self.entries:
                    self.entries[key] = _SEEN_ONCE
                    self._keep.append(params)
                return rule(cts_in, *args, **params)
            staging = cast("pe.DynamicJaxprTrace", trace)  # a key is only made under a staging trace
            if entry is _SEEN_ONCE:
                return self._record(key, staging, inputs, rule, proxy, cts_in, args, params)
            self.replayed += 1
            return self._replay(cast("_Transposed", entry), staging, inputs, args)

        return transpose

    @staticmethod
    def _values(primitive: core.Primitive, cts_in: object, args: tuple[object, ...]) -> list[object]:
        # several results: a list or a tuple of cotangents (_key checked)
        return [*(cast("list[object]", cts_in) if primitive.multiple_results else [cts_in]), *args]

    def _key(
        self,
        primitive: core.Primitive,
        fancy: bool,
        trace: pe.DynamicJaxprTrace,
        cts_in: object,
        args: tuple[object, ...],
        params: dict[str, object],
    ) -> tuple[Key | None, list[pe.DynamicJaxprTracer | None]]:
        """The call's key (None: never recorded) and its traced values, in order (None where
        another value stands)."""
        try:
            if primitive.multiple_results and not isinstance(cts_in, list | tuple):
                return None, []
            zero, undefined, val_accum, null_accum, tracer, var = self._types
            constants = trace.frame.constvar_to_val
            seen: dict[int, int] = {}
            parts: list[object] = []
            inputs: list[pe.DynamicJaxprTracer | None] = []
            for i, x in enumerate(self._values(primitive, cts_in, args)):
                kind = type(x)
                inputs.append(None)
                if x is None:
                    parts.append(None)
                    continue
                alias = seen.setdefault(id(x), i)
                if kind is zero or kind is undefined:
                    parts.append((kind, cast("ad.UndefinedPrimal", x).aval))
                elif kind is val_accum or kind is null_accum:
                    parts.append((kind, cast("ad.ValAccum", x).aval, alias))
                elif kind is tracer:
                    # a value of this trace (no literal, no constant: jax folds operations on those)
                    x = cast("pe.DynamicJaxprTracer", x)
                    atom = x.val
                    if x._trace is not trace or type(atom) is not var or atom in constants or atom.aval.has_qdd:
                        return None, []
                    inputs[i] = x
                    parts.append((x.aval, alias))
                elif kind is int or kind is float or kind is bool:
                    parts.append((kind, x))
                else:
                    return None, []  # a constant array, a reference accumulator, another trace's value
            named = tuple((name, id(value)) for name, value in params.items())
            context, eqn_context = self._contexts
            key = (primitive, fancy, tuple(parts), named, context(), eqn_context())
            hash(key)
            return key, inputs
        except Exception:
            return None, []

    def _record(
        self,
        key: Key,
        trace: pe.DynamicJaxprTrace,
        inputs: list[pe.DynamicJaxprTracer | None],
        rule: Callable[..., object],
        proxy: type[ad.ValAccum],
        cts_in: object,
        args: tuple[object, ...],
        params: dict[str, object],
    ) -> object:
        from jax._src import source_info_util as siu

        frame = trace.frame
        mark = frame_mark(trace)
        current = siu.current()
        ranges: list[tuple[int, int]] = []  # the rule's own equations: between its accumulations
        events: list[tuple[int, int, object]] = []  # (ranges before it, argument, cotangent)
        start = [len(frame.tracing_eqns)]

        def accumulated(position: int, real: ad.ValAccum, ct: object) -> None:
            ranges.append((start[0], len(frame.tracing_eqns)))
            events.append((len(ranges), position, ct))
            _accum(real, ct)
            start[0] = len(frame.tracing_eqns)

        val_accum = self._types[2]
        recorded = cast("Callable[..., object]", proxy)  # _accum_proxy's: (real, position, told)
        called = [recorded(a, i, accumulated) if type(a) is val_accum else a for i, a in enumerate(args)]
        out = rule(cts_in, *called, **params)
        ranges.append((start[0], len(frame.tracing_eqns)))
        spoiled = any(type(a) is proxy and cast("_Spoilable", a).spoiled for a in called)
        segment = None if spoiled else self._segment(trace, mark, current, inputs, ranges, events, out)
        self.entries[key] = segment
        return out

    def _segment(
        self,
        trace: pe.DynamicJaxprTrace,
        mark: FrameMark,
        current: siu.SourceInfo,
        inputs: list[pe.DynamicJaxprTracer | None],
        ranges: list[tuple[int, int]],
        events: list[tuple[int, int, object]],
        out: object,
    ) -> _Transposed | None:
        try:
            zero, _, _, _, tracer, _ = self._types
            if frame_mark(trace)[1:] != mark[1:]:
                return None
            where: dict[core.Var, Spec] = {}
            for i, x in enumerate(inputs):  # _key's: the call's values of this trace, None elsewhere
                if x is not None:
                    where.setdefault(cast("core.Var", x.val), ("in", i))  # _key checked: a variable
            prefix = tuple(current.name_stack.stack)
            eqns: list[StagedEqn] = []
            made: dict[core.Var, Spec] = {}  # outputs of the ranges before, as ("out", j, k)
            counts: list[int] = []
            for first, last in ranges:
                staged_range = staged_since(trace.frame, first, {**where, **made}, prefix, last)
                if staged_range is None:
                    return None
                part, part_made = staged_range
                base = len(eqns)
                for eqn in part:
                    if eqn[4] is not current.traceback:
                        return None  # staged under another traceback than the one a replay sets
                    ins = [_shifted(spec, base) for spec in eqn[6]]
                    eqns.append((*eqn[:6], ins, eqn[7]))
                for var, made_spec in part_made.items():  # staged_since's outputs: ("eq", j, k)
                    eq = cast("tuple[str, int, int]", made_spec)
                    made[var] = ("out", eq[1] + base, eq[2])
                counts.append(len(eqns))

            def spell(value: object) -> Spec | None:
                if value is None:
                    return ("none",)
                if type(value) is zero:
                    return ("zero", cast("Zero", value).aval)
                if type(value) is not tracer or cast("pe.DynamicJaxprTracer", value)._trace is not trace:
                    return None
                val = cast("core.Var", cast("pe.DynamicJaxprTracer", value).val)  # a literal: no key
                found = made.get(val) or where.get(val)
                return None if found is None else _shifted(found, 0)

            accums: list[tuple[int, int, Spec]] = []
            for before, position, ct in events:
                spec = spell(ct)
                if spec is None:
                    return None
                accums.append((counts[before - 1], position, spec))
            result: list[Spec] | None = None
            if out is not None:
                result = []
                for value in cast("list[object]", out):  # a rule's cotangents
                    spec = spell(value)
                    if spec is None:
                        return None
                    result.append(spec)
            return _Transposed(eqns, accums, result)
        except Exception:
            return None

    def _replay(
        self,
        entry: _Transposed,
        trace: pe.DynamicJaxprTrace,
        inputs: list[pe.DynamicJaxprTracer | None],
        args: tuple[object, ...],
    ) -> list[object] | None:
        from jax._src import source_info_util as siu

        zero = cast("type[Zero]", self._types[0])
        current = siu.current()
        made: list[list[object]] = []
        accums = entry.accums
        done = 0

        def resolve(spec: Spec) -> object:
            if spec[0] == "eq":
                return made[spec[1]][spec[2]]
            if spec[0] == "in":
                return inputs[spec[1]]
            if spec[0] == "zero":
                return zero(spec[1])
            return None

        def accumulate(count: int | None = None) -> None:
            """The accumulations recorded before equation ``count`` (None: all that are left)."""
            nonlocal done
            while done < len(accums) and (count is None or accums[done][0] <= count):
                _accum(cast("ad.ValAccum", args[accums[done][1]]), resolve(accums[done][2]))
                done += 1

        prefix = tuple(current.name_stack.stack)
        emit(
            trace,
            entry.eqns,
            resolve,
            prefix,
            traceback=current.traceback,
            stack=current.name_stack,
            made=made,
            before=lambda made: accumulate(len(made)),
        )
        accumulate()
        if entry.result is None:
            return None
        return [resolve(spec) for spec in entry.result]


def _shifted(spec: Spec, base: int) -> Spec:
    """A range's input spec in the whole record: its own outputs shifted by the equations before
    it, an earlier range's (``"out"``) as they are."""
    if spec[0] == "eq":
        return ("eq", spec[1] + base, spec[2])
    if spec[0] == "out":
        return ("eq", spec[1], spec[2])
    return spec


def _accum(accumulator: ad.ValAccum, ct: object) -> None:
    """``accumulator.accum(ct)`` (unannotated in jax)."""
    cast("Callable[[object], None]", accumulator.accum)(ct)


class _Spoilable:
    """What :func:`_accum_proxy`'s accumulator adds to jax's: whether a rule read its value."""

    spoiled: bool


_PROXY: list[type[ad.ValAccum]] = []


def _accum_proxy() -> type[ad.ValAccum]:
    """A ``ValAccum`` that tells its recorder of each accumulation, which then makes it in the
    real one (the rule sees the accumulator it expects: ``isinstance`` checks, its ``aval``); a
    rule that reads one's value spoils the record."""
    if _PROXY:
        return _PROXY[0]
    from jax._src.interpreters import ad

    class _Recorded(ad.ValAccum):
        def __init__(self, real: ad.ValAccum, position: int, told: Callable[[int, ad.ValAccum, object], None]) -> None:
            self.aval = real.aval
            self.spoiled = False
            self._real, self._position, self._told = real, position, told

        def accum(self, x: object) -> None:
            self._told(self._position, self._real, x)

        # a rule that reads or writes an accumulator's value itself is not recorded
        @property
        def val(self) -> object:
            self.spoiled = True
            return self._real.val

        @val.setter
        def val(self, value: object) -> None:
            self.spoiled = True
            self._real.val = value

        def freeze(self) -> object:
            self.spoiled = True
            return cast("Callable[[], object]", self._real.freeze)()  # unannotated in jax

    _PROXY.append(_Recorded)
    return _Recorded
