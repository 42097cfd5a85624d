"""The capture service: from a trace request to a stored graph, for the server, the CLI and the
benchmarks alike. No pygls here.

A trace goes, in this order:

1. :meth:`CaptureService.prepare`: recipe, profile (needs-input answers applied), interpreter and
   worker request, all decided without running anything (``engine.prepare``);
2. the gate: the interpreter's cached compatibility check, before any user import (the server's
   gate may offer a reviewed install; the default refuses with the check's message);
3. a place in line: at most ``max_running`` captures at once, ``max_waiting`` more waiting, and
   beyond that :class:`Busy`;
4. the capture: through the warm spare (started on first use) with the structure the target's
   last capture reported as a hint (``speculate.py``), or a fresh cold worker;
5. the graph decoded (``engine.finish``) and kept in the graph store, when there is one.

Failures are :class:`~jaxlsp.capture.engine.TraceFailure` (or :class:`Busy`); cancelling the
calling task kills the capture's processes.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from jaxlsp.capture import annotated, reuse
from jaxlsp.capture.engine import (
    Prepared,
    TraceFailure,
    TraceOutcome,
    TraceRequest,
    check_environment,
    finish,
    next_example,
    prepare,
)
from jaxlsp.capture.environment.interpreters import explain
from jaxlsp.capture.environment.routes import PATH_NAMES, Selection
from jaxlsp.capture.launch import phases
from jaxlsp.capture.launch.early import EarlyWorker
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.capture.launch.speculate import capture_speculatively, initialisers_of, is_init_snapshot, structure_of
from jaxlsp.capture.launch.supervise import CaptureOutcome
from jaxlsp.capture.learnedretry import concrete_retry, replay_retry
from jaxlsp.graph import io, slices
from jaxlsp.graph.compact import CompactFile, Packed
from jaxlsp.graph.model import COMPACT_VERSION, Graph
from jaxlsp.graph.store import GraphStore, Trace
from jaxlsp.offloop import off_loop
from jaxlsp.worker.protocol import ErrorKind

MAX_RUNNING = 2  # captures at once; more wait in line
MAX_WAITING = 8  # beyond this a request is refused rather than queued
MAX_HINTS = 64  # targets whose variables structure is remembered
MIN_FALLBACK_SECONDS = 5.0  # auto's next example starts only with this much of the deadline left

#: Decides whether a prepared capture may run: None, or the refusal (nothing of the target ran).
Gate = Callable[[Prepared], Awaitable[TraceFailure | None]]


async def refuse_incompatible(prepared: Prepared) -> TraceFailure | None:
    """The default gate: the interpreter's cached check; a problem is a refusal with its fix."""
    report = await asyncio.to_thread(check_environment, prepared)
    return None if report.ok else TraceFailure(ErrorKind.REFUSED, report.message())


def chosen_line(prepared: Prepared) -> str:
    """The interpreter nothing named, said before the capture: which one, why, and where its JAX
    and the target's library come from (the gate's check, cached, reads it first anyway)."""
    report = check_environment(prepared)
    found = ("jax", *report.needs) if report.needs else ("jax", "flax", "equinox")  # those installed
    where = report.probe.sourced(found)
    why = explain(
        Selection(prepared.python, prepared.route), prepared.req.workspace_root if prepared.req else Path.cwd()
    )
    return f"interpreter: {prepared.python}, {why}" + (f"; {where}" if where else "")


class Busy(Exception):
    """Too many captures are waiting already; try again when some finish."""


@dataclass
class Captured:
    """A finished capture: the decoded outcome, and its entry in the store (when there is one)."""

    outcome: TraceOutcome
    trace: Trace | None


class CaptureService:
    """Scheduling, the warm pool, speculation hints, the compatibility gate and storage.

    ``warm=False`` never starts a spare (every capture is a fresh worker): the CLI's one-shot way,
    whose ``early`` worker (capture/launch/early.py) is used for its capture when it fits. ``direct``:
    the outcome keeps the worker's compact form, checked, for a file written as it came
    (``TraceOutcome.compact``; its ``graph`` the small parts only), never decoded into a model
    object per node and value (a store's trace is read as packed columns whatever ``direct`` says).
    """

    def __init__(
        self,
        *,
        store: GraphStore | None = None,
        gate: Gate = refuse_incompatible,
        warm: bool = True,
        pool: SparePool | None = None,
        max_running: int = MAX_RUNNING,
        max_waiting: int = MAX_WAITING,
        early: EarlyWorker | None = None,
        direct: bool = False,
    ) -> None:
        self.store = store
        self.direct = direct
        self.early = early
        self.gate = gate
        self.warm = warm
        self.pool = pool or SparePool()
        self.max_waiting = max_waiting
        self._slots = asyncio.Semaphore(max_running)
        self._waiting = 0
        # (file, name, profile) -> the variables structure its last capture found (speculate.py),
        # or an NNX / Equinox model's init snapshot (worker/reuse/initsnap.py)
        self._hints: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        # the background requests for init snapshots, by target (at most one each; see _snapshot)
        self._snapshots: dict[tuple[str, str, str], asyncio.Future[None]] = {}
        # hears what the service did on its own, in a line (the server logs it: window/logMessage)
        self.on_note: Callable[[str], None] | None = None
        self._reuse = reuse.Reuse()  # what each kept trace was made of, for options.reuse

    def prepare(self, req: TraceRequest) -> Prepared:
        """Step 1 (no process runs); raises TraceFailure (refused, needs input)."""
        return annotated.answered(prepare(req))

    async def capture(self, prepared: Prepared, options: CaptureOptions) -> CaptureOutcome:
        """Steps 2 to 4: the gate, a place in line, the capture; the worker's outcome undecoded."""
        refusal = await self.gate(prepared)
        if refusal is not None:
            raise refusal
        phases.mark("gate")
        if self._waiting >= self.max_waiting:
            raise Busy("too many traces waiting: try again when some finish")
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        phases.mark("slot")
        try:
            return await self._capture(prepared, options)
        finally:
            self._slots.release()

    async def run(
        self,
        prepared: Prepared,
        options: CaptureOptions,
        meta: dict[str, Any] | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> Captured:
        """Steps 2 to 5 for a prepared capture; ``meta`` labels the stored trace (the server's uri
        and name), with the profile and the interpreter added. When auto's example ends or fails
        without calling the target, its next examples run in turn under the same deadline
        (``notify`` hears each ``running ...``); if none reaches it, the failure says what each
        did."""
        phases.mark("prepare")
        key = reuse.request_key(prepared) if self.store is not None else None
        if options.reuse and self.store is not None:
            newest = self.store.newest_like(meta or {})
            found = None if newest is None else await off_loop(self._reuse.moved, newest, key, meta or {})
            if found is not None:  # the same program: its last graph, positions moved (capture/reuse.py)
                phases.mark("moved")
                phases.reused("graph (moved)")
                same = self.store.keep(found[0])
                await off_loop(self._reuse.remember, same, key, found[1])
                phases.mark("store")
                return Captured(found[1], same)
        failures: list[TraceFailure] = []
        if prepared.request["profile"].get("example"):
            options = replace(options, timeout=options.example_timeout)
        deadline = time.monotonic() + options.timeout  # the next examples share the first one's
        while True:
            outcome = await self.capture(prepared, options)
            try:
                # a big graph decodes for seconds
                traced, packed = await off_loop(_decode, prepared, outcome, self.store is not None, self.direct)
                phases.mark("decode")
                break
            except TraceFailure as exc:
                exc = annotated.fell_back(prepared, exc)  # a dimension that cannot stay a symbol asks its size
                failures.append(exc)
                following = next_example(prepared, exc)
                following = following or concrete_retry(prepared, exc)  # learned symbolic dims that failed
                following = following or replay_retry(prepared, exc)  # a learned call failed at a value check
                left = deadline - time.monotonic()
                if following is None or left < MIN_FALLBACK_SECONDS:
                    raise _all_of(failures) from None
                prepared = following
                options = replace(options, timeout=left)
                running = prepared.running()
                if running and notify is not None:
                    notify(running)
        trace = None
        if self.store is not None:
            # The graph's paths are relative (worker/core/paths.py); the roots they are relative to stay
            # with the stored trace, which resolves them (graph/store.py), never in the graph.
            roots = outcome.result.get("roots") or {"base": str(prepared.request.get("workspaceRoot") or "")}
            label = {**(meta or {}), "profile": traced.resolved.name, "interpreter": outcome.python, "roots": roots}
            # Indexes and the diff from the target's previous trace are made off the loop too: a
            # hover or a lens title after it would otherwise compute them in the loop (seconds).
            before = self.store.newest_like(label)
            kept = packed if packed is not None else traced.graph
            built = await off_loop(GraphStore.build, kept, label, before)
            trace = self.store.keep(built)
            await off_loop(self._reuse.remember, trace, reuse.request_key(prepared), traced)
            phases.mark("store")
        return Captured(traced, trace)

    async def trace(self, req: TraceRequest, options: CaptureOptions, meta: dict[str, Any] | None = None) -> Captured:
        """All five steps."""
        return await self.run(self.prepare(req), options, meta)

    async def _capture(self, prepared: Prepared, options: CaptureOptions) -> CaptureOutcome:
        request = prepared.request
        if "values" in request:  # the run stops, naming where it was, before the time limit kills it
            request = {**request, "values": {**request["values"], "timeout": options.timeout}}
        if not self.warm:
            return await self.pool.capture(request, prepared.python, options, warm=False, early=self.early)
        await self.pool.start(prepared.python)
        phases.mark("spare")
        if "values" in request or "time" in request:  # these initialise for real: no structure hint to use
            return await self.pool.capture(request, prepared.python, options)
        target = prepared.request["target"]
        key = (str(target["path"]), str(target["name"]), str(prepared.resolved.name))
        structure, initialisers = self._hints.get(key, (None, None))
        if not options.reuse and is_init_snapshot(structure):
            # The user's own trace always runs the constructor: a snapshot cannot know everything
            # it reads (a C library's files, numpy's random state), so only a live re-trace may
            # take its word; this capture leaves a new one (issue 45)
            structure = None
        outcome, _ = await capture_speculatively(
            self.pool, prepared.request, prepared.python, options, hint=structure, initialisers=initialisers
        )
        self._remember(key, structure_of(outcome), initialisers_of(outcome, initialisers))
        if outcome.ok and outcome.result.get("snapshotWanted") and key not in self._snapshots:
            self._snapshots[key] = asyncio.ensure_future(self._snapshot(key, prepared, options))
        current = phases.CURRENT.get()
        if current is not None:
            current.took(outcome.result.get("timings"), outcome.result.get("clock"))
            if outcome.ok and outcome.result.get("hint") in ("held", "repaired"):  # the init was skipped
                current.reused.append(f"init ({outcome.result['hint']})")
        return outcome

    def _remember(self, key: tuple[str, str, str], structure: Any, initialisers: Any) -> None:
        self._hints.pop(key, None)
        if structure is not None:
            self._hints[key] = (structure, initialisers)
            while len(self._hints) > MAX_HINTS:
                self._hints.popitem(last=False)

    async def _snapshot(self, key: tuple[str, str, str], prepared: Prepared, options: CaptureOptions) -> None:
        """An NNX or Equinox target's capture ran its constructor: make the init's snapshot for its
        next one, in the background (worker/reuse/initsnap.py). Noting what the constructor runs takes
        about three times the init, so no capture waits for it: it runs at a lower priority (the
        worker's ``nice``) beside whatever capture comes next, one a target at a time; a snapshot
        of an older text is only used if the files still fingerprint the same."""
        phases.CURRENT.set(None)  # (this task's own context) not the phases of the trace that asked
        request = {**prepared.request, "snapshotOnly": True}
        quiet = replace(options, on_log=None, on_phase=None, cancel=None, reuse=False)
        try:
            started = time.monotonic()
            outcome = await self.pool.capture(request, prepared.python, quiet)
            snapshot = structure_of(outcome)
            if snapshot is not None:
                self._remember(key, snapshot, self._hints.get(key, (None, None))[1])
            if self.on_note is not None:
                kept = "kept" if snapshot is not None else "not kept (see worker/reuse/initsnap.py for why)"
                self.on_note(f"init snapshot of {key[1]} ({key[2]}) {kept} in {time.monotonic() - started:.2f} s")
        except Exception:  # a snapshot only ever saves time
            return
        finally:
            if self._snapshots.get(key) is asyncio.current_task():
                del self._snapshots[key]

    def _stop_snapshots(self) -> None:
        for task in self._snapshots.values():
            task.cancel()
        self._snapshots.clear()

    async def close(self) -> None:
        """Stop the warm spares (and any capture they run)."""
        self._stop_snapshots()
        await self.pool.close()


def _decode(
    prepared: Prepared, outcome: CaptureOutcome, keep: bool, direct: bool = False
) -> tuple[TraceOutcome, Packed | None]:
    """``finish`` (in a graph thread), then the result's JSON form of the graph let go there too:
    freeing its million objects would otherwise take the loop's thread a third of a second. With
    ``keep`` (a server's store keeps the trace) the worker's compact form is read straight into
    packed columns for the store (which checks every column, index and reference as it reads
    them; rows are checked again when a reader materialises one), and the outcome keeps only the
    graph's small parts: never a model object per node and value (0.64 s at 10,000 equations,
    made only to be dropped). With ``direct`` (and no ``keep``) the compact form is checked as
    ``io.from_json`` checks it and kept, as the file it makes, in the outcome (``compact``)."""
    packed: list[Packed] = []
    made: list[CompactFile] = []

    def pack(sent: Any) -> Graph:
        compact = isinstance(sent, dict) and sent.get("version") == COMPACT_VERSION
        if not (compact and (keep or direct)):
            return io.from_json(sent)
        if not keep:
            made.append(CompactFile(sent))
            return made[0].graph
        try:
            packed.append(Packed(sent))
            return packed[0].shell()
        except (TypeError, KeyError, IndexError) as exc:  # what the columns' checks did not foresee
            raise ValueError(f"<graph>: {type(exc).__name__}: {exc}") from None

    traced = finish(prepared, outcome, pack)
    sent = cast(dict[str, Any], outcome.result).pop("graph", None)
    if made:  # its file is made of ``sent``'s own lists: they go when the outcome does
        traced.compact = made[0]
    elif not packed:  # the packed columns keep the small parts of ``sent`` (its header) as read
        slices.release(sent)  # a piece at a time: freed at once, it holds the GIL to the end
    return traced, packed[0] if packed else None


def _all_of(failures: list[TraceFailure]) -> TraceFailure:
    """The last failure, saying what the earlier examples did before it."""
    last = failures[-1]
    if len(failures) == 1:
        return last
    earlier = "; ".join(f.paragraph() for f in failures[:-1])
    return replace(last, message=f"{last.message} (before it: {earlier})")


def trace_once(
    req: TraceRequest,
    options: CaptureOptions,
    notify: Callable[[str], None] | None = None,
    early: EarlyWorker | None = None,
    direct: bool = False,
) -> TraceOutcome:
    """One cold capture for callers without an event loop (the CLI); raises TraceFailure.
    ``notify`` hears ``running PATH[::TEST] to learn the inputs`` before an example runs;
    ``early`` is a worker started ahead for it (used if it fits, else killed; killed on failure);
    ``direct`` as for :class:`CaptureService`."""

    done: list[TraceOutcome] = []

    async def once() -> None:
        service = CaptureService(warm=False, early=early, direct=direct)
        try:
            prepared = service.prepare(req)
            if notify is not None and prepared.route in PATH_NAMES:
                notify(await asyncio.to_thread(chosen_line, prepared))
            running = prepared.running()
            if running and notify is not None:
                notify(running)
            done.append((await service.run(prepared, options, notify=notify)).outcome)
        finally:
            await service.close()

    # The outcome is handed out beside the loop's main task, never as its result: at its end
    # asyncio.run (3.11) looks up the SIGINT handler, whose failed enum lookup formats the
    # handler's repr, which holds the task, whose repr holds its result: the whole graph as
    # dataclass reprs (10,000 equations: 1.1 s of the CLI's wall time, growing with the graph).
    try:
        asyncio.run(once())
    finally:
        if early is not None:
            early.discard()
    return done[0]
