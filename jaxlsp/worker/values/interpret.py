"""The values run's interpreter: the graph's walk (``build.Walked``) evaluated equation by equation.

Each equation is its primitive's ``bind`` with its params (``get_bind_params``, as
``jax.core.eval_jaxpr`` does), on concrete arrays. Higher-order equations are opened rather than
run whole, so every value inside gets statistics: ``jit``, ``remat`` and ``custom_jvp`` /
``custom_vjp`` bodies (their operands map 1:1), the *taken* ``cond`` branch (counted in
``executed``), and ``scan`` / ``while`` bodies once per iteration. Anything else with a body
(``shard_map``, ``custom_linear_solve``) runs whole: the values inside get no statistics and its
nodes are *partial* for the replay validation, as are callbacks. A scatter's or a generic
reduction's combiner (``COMBINERS``) runs whole too, but is not partial: it is how two elements
combine, nothing the validation could check apart from the primitive's own output.

Values are keyed by the graph's value ids (the builder recorded which id each variable got at
each call site), freed after their last use, and summarised as they are made (``stats.py``).
The first equation whose inputs are finite and whose output is not is the *first non-finite
origin*. Before each equation the run checks its deadline and its memory: a run that would pass
either stops with :class:`Stopped`, which names the equation it reached.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, SupportsInt, cast

from jaxlsp.worker.protocol import Json
from jaxlsp.worker.tracing import jaxcompat
from jaxlsp.worker.tracing.build import ONE_TO_ONE, Step, Walked, is_literal
from jaxlsp.worker.values.stats import (
    SMALL,
    Accumulator,
    Summary,
    fetched,
    joined_range,
    summarize,
    summarize_batch,
)

if TYPE_CHECKING:
    import jax
    from jax.core import ShapedArray
    from jax.typing import ArrayLike

CALLBACKS = frozenset({"pure_callback", "io_callback", "debug_callback", "callback"})
# Primitives whose body only says how two elements combine (a scatter-add's ``add``, a generic
# reduction's monoid): it runs inside the primitive, on scalars, and checks nothing of its own, so
# its nodes leave the replay validation whole (a Linen embedding's gradient is a scatter-add).
COMBINERS = frozenset(
    {"scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max", "scatter_apply"}
    | {"reduce", "reduce_window", "select_and_scatter"}
)
# Primitives whose output holds exactly its operand's elements, rearranged (the same statistics),
# and broadcast_in_dim, which repeats each of them out.size / in.size times: summarised from the
# operand's figures instead of another pass over the array.
REARRANGING = frozenset({"reshape", "squeeze", "expand_dims", "transpose", "rev", "copy", "copy_p"})
CHECKED_BYTES = 64 * 1024  # outputs from this size on are checked against the memory budget first
MEMO_SIZE = 256  # summaries remembered by array (a body's result is its equation's output too)


class Stopped(Exception):
    """The run stopped before ``step``: ``kind`` is ``memory`` or ``timeout``."""

    def __init__(self, kind: str, reason: str, step: Step | None) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.step = step


@dataclass
class Origin:
    """The first equation with finite inputs and a non-finite output."""

    step: Step
    value: str  # its first non-finite output
    summary: Summary
    inputs: list[tuple[str, Summary | None, bool]]  # (value id, its figures, a literal operand)
    iteration: list[tuple[str, str, int]]  # (loop kind, group, 1-based index), outermost first


@dataclass
class Budget:
    """When to stop: ``deadline`` (``time.monotonic``), and ``memory(nbytes)`` giving a reason
    when allocating ``nbytes`` more would pass the memory cap (None: it fits)."""

    deadline: float | None = None
    memory: Callable[[int], str | None] | None = None


_MISSING = object()
BATCH = 64  # small observations summarised together
BATCH_ELEMENTS = 1 << 14  # ... of at most this many elements in all (the batch's work buffers)


@dataclass
class _Pending:
    """A queued observation of ``vid`` (or, with ``check``, the first non-finite check of an
    equation, after its outputs)."""

    vid: str
    array: object  # a value's array (a device or host array, a literal's number)
    iteration: list[int] | None
    source: str | None = None
    factor: int = 1
    check: Step | None = None
    loops: list[tuple[str, str, int]] | None = None
    summary: Summary | None = None
    ready: bool = False
    same: _Pending | None = None  # an earlier queued observation of the same array


@dataclass
class _Tables:
    dying: list[list[str]]  # per step: value ids last used there (freed after it)


class Interpreter:
    """Evaluates a recorded walk; results in ``accumulators``, ``executed``, ``origin``,
    ``partial``, ``kept`` (the arrays of the value ids in ``keep``, the last one seen)."""

    def __init__(self, on_host: bool, budget: Budget, keep: set[str] | None = None) -> None:
        self.on_host = on_host
        self.budget = budget
        self.keep = keep or set()
        self.kept: dict[str, object] = {}
        self.accumulators: dict[str, Accumulator] = {}
        self.executed: dict[str, int] = {}
        self.origin: Origin | None = None
        self.partial: dict[str, str] = {}  # node id -> why it is not checked
        self.latest: dict[str, Summary | None] = {}  # each value's last observation
        self._tables: dict[int, _Tables] = {}
        self._memo: dict[int, tuple[weakref.ref[object], Summary | None]] = {}
        self._loops: list[tuple[str, str, int]] = []
        self._seen_constants: set[str] = set()
        self._queue: list[_Pending] = []
        self._queued = 0  # elements in the queue

    # --- entry ------------------------------------------------------------------------------

    def run(self, top: Walked, operands: list[object]) -> list[object]:
        """The program's outputs for the flat ``operands`` (one per invar of the top jaxpr)."""
        if len(operands) != len(top.jaxpr.invars):
            raise ValueError(f"{len(operands)} operands for a program of {len(top.jaxpr.invars)} inputs")
        outputs = self.walk(top, operands, fresh=range(len(operands)))
        self.flush()
        return outputs

    def stats(self) -> dict[str, dict[str, Json]]:
        """The ``stats`` object of every value that was observed."""
        return {vid: acc.stats() for vid, acc in self.accumulators.items()}

    # --- observing values ---------------------------------------------------------------------
    #
    # Observations wait in a queue and are summarised in order: small arrays in batches (one set
    # of numpy calls for up to BATCH of them; an accelerator's fetched in one transfer), a large
    # one at once (with those before it). The first non-finite check of an equation waits in the
    # same queue behind its outputs, so it sees every figure as of that equation, and a queued
    # small array stays alive a little longer.

    def observe(self, vid: str, array: object, source: str | None = None, factor: int = 1) -> None:
        """Queue ``array`` as an observation of ``vid``; ``source``: its figures are those of
        that value's latest observation, each element repeated ``factor`` times."""
        if vid in self.keep:
            self.kept[vid] = array
        item = _Pending(vid, array, self._iteration(), source, factor)
        self._queue.append(item)
        size = getattr(array, "size", 1)
        if not isinstance(size, int) or size > SMALL:
            self.flush()
            return
        self._queued += size
        if len(self._queue) >= BATCH or self._queued >= BATCH_ELEMENTS:
            self.flush()

    def observe_constant(self, vid: str, value: object) -> None:
        """Literals and closed-over constants: the same on every pass, observed once."""
        if vid not in self._seen_constants:
            self._seen_constants.add(vid)
            self._queue.append(_Pending(vid, value, None))

    def _iteration(self) -> list[int] | None:
        return [i for _, _, i in self._loops] if self._loops else None

    def flush(self) -> None:
        """Summarise every queued observation, in order."""
        queue, self._queue = self._queue, []
        self._queued = 0
        if not queue:
            return
        self._batch(queue)
        for item in queue:
            if item.check is not None:
                if self.origin is None:
                    self.find_origin(item.check, item.loops or [])
                continue
            summary = item.summary
            if item.source is not None:
                found = self.latest.get(item.source)
                if found is not None:
                    summary = found if item.factor == 1 else found.repeated(item.factor)
            if summary is None and not item.ready:
                remembered = self._memoised(item.array)
                if isinstance(remembered, Summary) or remembered is None:
                    summary = remembered
                else:
                    acc = self.accumulators.get(item.vid) if item.iteration is not None else None
                    within = acc.within if acc is not None else None
                    summary = summarize(item.array, on_host=self.on_host, within=within)
                    self._remember(item.array, summary)
            self._record(item.vid, summary, item.iteration)

    def _batch(self, queue: list[_Pending]) -> None:
        """Summaries of the queue's small arrays, all at once on the host (sharing repeated arrays;
        an accelerator's come over in one transfer)."""
        batch: list[_Pending] = []
        first: dict[int, _Pending] = {}
        for item in queue:
            if item.check is not None or item.source is not None:
                continue
            array = item.array
            size = getattr(array, "size", 1)
            if not isinstance(size, int) or size > SMALL:
                continue
            remembered = self._memoised(array)
            if isinstance(remembered, Summary) or remembered is None:
                item.summary, item.ready = remembered, True
                continue
            earlier = first.get(id(array))
            if earlier is not None:
                item.same = earlier
                continue
            first[id(array)] = item
            batch.append(item)
        if not batch:
            self._resolve_same(queue)
            return
        ranges: dict[str, tuple[float, float] | None] = {}

        def within(i: int, lo: float, hi: float) -> tuple[float, float]:
            item = batch[i]
            if item.iteration is None:
                return joined_range(lo, hi, None)
            if item.vid not in ranges:
                acc = self.accumulators.get(item.vid)
                ranges[item.vid] = acc.within if acc is not None else None
            seen = ranges[item.vid]
            joined = joined_range(lo, hi, seen)
            ranges[item.vid] = (lo, hi) if seen is None else (min(lo, seen[0]), max(hi, seen[1]))
            return joined

        arrays = [b.array for b in batch]
        if not self.on_host:  # an accelerator's small arrays: to the host in one transfer
            arrays = fetched(arrays)
        for item, summary in zip(batch, summarize_batch(arrays, within), strict=True):
            item.summary, item.ready = summary, True
            self._remember(item.array, summary)
        self._resolve_same(queue)

    @staticmethod
    def _resolve_same(queue: list[_Pending]) -> None:
        for item in queue:
            if item.same is not None:
                item.summary, item.ready = item.same.summary, True

    def _memoised(self, array: object) -> Summary | object | None:
        hit = self._memo.get(id(array))
        if hit is not None and hit[0]() is array:
            return hit[1]
        return _MISSING

    def _remember(self, array: object, summary: Summary | None) -> None:
        if len(self._memo) >= MEMO_SIZE:  # the oldest quarter goes: a body's results are recent
            for key in list(itertools.islice(self._memo, MEMO_SIZE // 4)):
                del self._memo[key]
        with contextlib.suppress(TypeError):  # a numpy scalar or literal: nothing to share it with
            self._memo[id(array)] = (weakref.ref(array), summary)

    def _record(self, vid: str, summary: Summary | None, iteration: list[int] | None) -> None:
        self.latest[vid] = summary
        if summary is not None:
            acc = self.accumulators.get(vid)
            if acc is None:
                acc = self.accumulators[vid] = Accumulator()
            acc.add(summary, iteration)

    # --- walking ------------------------------------------------------------------------------

    def tables(self, w: Walked) -> _Tables:
        found = self._tables.get(id(w))
        if found is None:
            outs = {w.env[v] for v in w.jaxpr.outvars if not is_literal(v) and v in w.env}
            last: dict[str, int] = {}
            for k, step in enumerate(w.steps):
                for atom, vid in zip(step.eqn.invars, step.node.inputs, strict=False):
                    if not is_literal(atom):
                        last[vid] = k
                for vid in step.node.outputs:
                    last.setdefault(vid, k)  # never read: freed once observed
            dying: list[list[str]] = [[] for _ in w.steps]
            for vid, k in last.items():
                if vid not in outs:
                    dying[k].append(vid)
            found = self._tables[id(w)] = _Tables(dying)
        return found

    def walk(self, w: Walked, args: list[object], fresh: Iterable[int] | None = None) -> list[object]:
        frame: dict[str, object] = {}
        for var, const in zip(w.jaxpr.constvars, w.consts or [], strict=False):
            vid = w.env[var]
            frame[vid] = const
            self.observe_constant(vid, const)
        new = set(w.fresh if fresh is None else fresh)
        for i, var in enumerate(w.jaxpr.invars):
            vid = w.env[var]
            frame[vid] = args[i]
            if i in new:
                self.observe(vid, args[i])
        dying = self.tables(w).dying
        for k, step in enumerate(w.steps):
            self.check(step)
            ins: list[object] = []
            for atom, vid in zip(step.eqn.invars, step.node.inputs, strict=False):
                if is_literal(atom):
                    ins.append(atom.val)
                    self.observe_constant(vid, atom.val)
                else:
                    ins.append(frame[vid])
            outs, opened = self.step(step, ins)
            source, factor = (None, 1) if opened else self.derive(step)
            for vid, out in zip(step.node.outputs, outs, strict=False):
                self.observe(vid, out, source, factor)
                frame[vid] = out
            if self.origin is None and not opened:
                self._queue.append(_Pending("", None, None, check=step, loops=list(self._loops)))
            del ins, outs
            for vid in dying[k]:
                frame.pop(vid, None)
            if not self._loops and w.group is None and not self._queue:  # a top-level equation is done
                self._memo.clear()
        result: list[object] = []
        for out in w.jaxpr.outvars:
            result.append(out.val if is_literal(out) else frame[w.env[out]])
        return result

    def derive(self, step: Step) -> tuple[str | None, int]:
        """For rearranging primitives and broadcasts: the operand whose figures are the output's,
        and how many times each element repeats (None: the output is summarised itself)."""
        prim = step.eqn.primitive.name
        if (prim not in REARRANGING and prim != "broadcast_in_dim") or len(step.node.outputs) != 1:
            return None, 1
        atom = step.eqn.invars[0] if step.eqn.invars else None
        if atom is None or is_literal(atom) or self._loops:  # in a loop each value's histogram has its own range
            return None, 1
        if prim != "broadcast_in_dim":
            return step.node.inputs[0], 1
        size, source = 1, 1
        for d in getattr(step.eqn.outvars[0].aval, "shape", ()):
            size *= d if isinstance(d, int) else 0
        for d in getattr(atom.aval, "shape", ()):
            source *= d if isinstance(d, int) else 0
        if source == 0 or size % source:
            return None, 1
        return step.node.inputs[0], size // source

    def step(self, step: Step, ins: list[object]) -> tuple[list[object], bool]:
        """The equation's outputs, and whether its body was opened (the origin is found inside)."""
        eqn = step.eqn
        prim = eqn.primitive.name
        regions = step.regions
        if prim in CALLBACKS:
            self.partial[step.node.id] = f"{prim}: a callback into Python"
        if regions:
            if prim in ONE_TO_ONE and len(regions) == 1 and len(regions[0].jaxpr.invars) == len(ins):
                return self.region(regions[0], ins), True
            if prim == "cond" and all(len(r.jaxpr.invars) == len(ins) - 1 for r in regions):
                index = min(max(int(cast("SupportsInt", ins[0])), 0), len(regions) - 1)  # the branch index
                return self.region(regions[index], ins[1:]), True
            if prim == "scan" and len(regions) == 1:
                return self.scan(step, regions[0], ins), True
            if prim == "while" and len(regions) == 2:
                return self.while_loop(step, regions[0], regions[1], ins), True
            if prim not in COMBINERS:
                for region in regions:
                    self._mark_partial(region, f"inside {prim}, which ran whole")
        return self.bind(step, ins), False

    def region(self, w: Walked, args: list[object]) -> list[object]:
        if w.group is not None:
            self.executed[w.group] = self.executed.get(w.group, 0) + 1
        return self.walk(w, args)

    def bind(self, step: Step, ins: list[object]) -> list[object]:
        eqn = step.eqn
        prim = eqn.primitive
        try:
            with jaxcompat.equation_context(eqn):
                # both unannotated in jax
                bind = cast("Callable[..., object]", prim.bind)
                bind_params = cast("Callable[[dict[str, object]], dict[str, object]]", prim.get_bind_params)
                out = bind(*ins, **bind_params(eqn.params))
        except MemoryError:
            raise Stopped("memory", "the device ran out of memory", step) from None
        except Exception as exc:
            text = str(exc)
            if "RESOURCE_EXHAUSTED" in text or "Out of memory" in text or "bad_alloc" in text:
                raise Stopped("memory", f"the device ran out of memory ({text.splitlines()[0][:200]})", step) from None
            raise
        return list(cast("Iterable[object]", out)) if prim.multiple_results else [out]

    # --- loops --------------------------------------------------------------------------------

    def scan(self, step: Step, body: Walked, ins: list[object]) -> list[object]:
        import jax.numpy as jnp

        params = step.eqn.params
        nconsts, ncarry = int(params["num_consts"]), int(params["num_carry"])
        length, reverse = int(params["length"]), bool(params.get("reverse", False))
        consts, carry, xs = ins[:nconsts], ins[nconsts : nconsts + ncarry], ins[nconsts + ncarry :]
        # Each scanned array's rows as they are needed (jax slices them a hundred at a time).
        # the scanned operands: arrays
        slices = [iter(jnp.flip(x, 0) if reverse else x) for x in cast("list[jax.Array]", xs)] if length else []
        ys: list[list[object]] = [[] for _ in body.jaxpr.outvars[ncarry:]]
        for i in range(length):
            self.enter(step, "scan", body.group, i + 1)
            try:
                out = self.region(body, [*consts, *carry, *(next(s) for s in slices)])
            finally:
                self.leave()
            carry = out[:ncarry]
            for j, y in enumerate(out[ncarry:]):
                ys[j].append(y)
        del slices
        stacked: list[object] = []
        for parts, var in zip(ys, step.eqn.outvars[ncarry:], strict=False):
            if not parts:
                aval = cast("ShapedArray", var.aval)  # a scan's stacked output: an array
                stacked.append(jnp.zeros(aval.shape, aval.dtype))
                continue
            stacked.append(jnp.stack(cast("list[ArrayLike]", parts[::-1] if reverse else parts)))
        return [*carry, *stacked]

    def while_loop(self, step: Step, cond: Walked, body: Walked, ins: list[object]) -> list[object]:
        params = step.eqn.params
        cn, bn = int(params.get("cond_nconsts", 0)), int(params.get("body_nconsts", 0))
        cconsts, bconsts, carry = ins[:cn], ins[cn : cn + bn], ins[cn + bn :]
        i = 0
        while True:
            self.enter(step, "while", body.group, i + 1)
            try:
                (pred,) = self.region(cond, [*cconsts, *carry])
                if not bool(pred):
                    break
                carry = self.region(body, [*bconsts, *carry])
            finally:
                self.leave()
            i += 1
        return list(carry)

    def enter(self, step: Step, kind: str, group: str | None, index: int) -> None:
        self.check(step)
        self._loops.append((kind, group or "", index))

    def leave(self) -> None:
        self._loops.pop()

    # --- limits, origin, partial --------------------------------------------------------------

    def check(self, step: Step) -> None:
        budget = self.budget
        if budget.deadline is not None and time.monotonic() > budget.deadline:
            raise Stopped("timeout", "the run passed its deadline", step)
        if budget.memory is not None and not step.regions:
            need = 0
            for var in step.eqn.outvars:
                aval = var.aval
                size = 1
                for d in getattr(aval, "shape", ()):
                    size *= d if isinstance(d, int) else 1
                itemsize = getattr(getattr(aval, "dtype", None), "itemsize", 0) or 0
                need += size * int(itemsize)
            if need >= CHECKED_BYTES:
                reason = budget.memory(need)
                if reason is not None:
                    raise Stopped("memory", reason, step)

    def find_origin(self, step: Step, loops: list[tuple[str, str, int]]) -> None:
        bad = next(
            ((vid, s) for vid in step.node.outputs if (s := self.latest.get(vid)) is not None and s.nonfinite),
            None,
        )
        if bad is None:
            return
        inputs: list[tuple[str, Summary | None, bool]] = []
        for atom, vid in zip(step.eqn.invars, step.node.inputs, strict=False):
            s = self.latest.get(vid)
            if s is not None and s.nonfinite:
                return  # a non-finite input: this equation only passes it on
            inputs.append((vid, s, is_literal(atom)))
        self.origin = Origin(step, bad[0], bad[1], inputs, loops)

    def _mark_partial(self, w: Walked, reason: str) -> None:
        for step in w.steps:
            self.partial.setdefault(step.node.id, reason)
            for region in step.regions:
                self._mark_partial(region, reason)
