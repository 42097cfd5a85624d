"""When live traces run: the queue behind ``jaxlsp.liveShapes`` (no pygls, no processes here).

The server submits the targets a save (or an open) touches, each with a fingerprint of the text
it would trace (its files' hashes). The scheduler decides, in this order:

- a target already traced (successfully) from the same text is fresh: nothing runs;
- a target whose last two live traces failed with the same cause waits until its text changes
  (or learning keeps new inputs for it: ``inputs_changed``, as for a fresh one);
- the rest go to the front of the queue, the newest save's targets first;
- a running live trace of a submitted target is for older text: it is cancelled and queued again;
- saves in a burst (one within ``burst`` seconds of the previous) wait until ``quiet`` seconds
  pass without a save, so ten saves in two seconds run at most two traces;
- at most ``slots`` live traces run at a time (the server: as many as the capture service runs at
  once, up to the machine's cores), and none while an explicit trace runs (``pause`` cancels the
  running ones and queues them again; ``resume`` carries on);
- ``prefer`` moves a document's queued targets to the front: the server calls it for the documents
  an editor shows (it asks for their lenses or inlay hints), so the visible file's targets go first
  when many files were opened at once.

Nothing polls: work starts from a submit, a resume, the end of a quiet period (one timer) or the
end of a running trace, which starts the next queued one in its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
QUIET = 0.4  # seconds without a save before a burst's traces start
BURST = 0.6  # a save this soon after the previous one is part of a burst
SAME_CAUSE_LIMIT = 2  # live failures with one cause before the target waits for its text to change

FRESH, TRACING, QUEUED, FAILED, NOT_LIVE = "fresh", "tracing", "queued", "failed", "notLive"


@dataclass(frozen=True)
class Target:
    """One live target: the document that defines it and its name there."""

    uri: str
    name: str


@dataclass(frozen=True)
class Outcome:
    """How a live trace ended: ``fresh`` (a graph), ``failed`` (its cause) or ``notLive`` (why
    nothing ran: no inputs without asking, an interpreter to fix)."""

    state: str
    cause: str = ""
    trace_id: str | None = None


@dataclass
class Status:
    """What ``jaxlsp/liveStatus`` says of one target."""

    state: str
    cause: str = ""
    trace_id: str | None = None
    fingerprint: str | None = None  # of the text its last outcome was for
    settled: str = ""  # the state of its last outcome (what a cancelled trace goes back to)
    failures: int = 0  # live failures in a row with ``cause``
    waiting: bool = False  # failed twice with one cause: waits for its files to change


@dataclass
class LiveScheduler:
    """The live queue; ``run`` traces one target (cancelling its task kills the capture) and
    ``changed`` hears of every status change."""

    run: Callable[[Target], Awaitable[Outcome]]
    changed: Callable[[], None] = lambda: None
    slots: int = 1  # live traces at once
    quiet: float = QUIET
    burst: float = BURST
    clock: Callable[[], float] = time.monotonic
    enabled: bool = True
    statuses: dict[Target, Status] = field(default_factory=dict)
    started: int = 0  # live traces started (tests and benchmarks count them)
    _queue: list[Target] = field(default_factory=list)
    _wanted: dict[Target, str] = field(default_factory=dict)  # the fingerprint each queued target is for
    # the running traces: each target's fingerprint and task, in the order they started
    _running: dict[Target, tuple[str, asyncio.Task[None]]] = field(default_factory=dict)
    _timer: asyncio.TimerHandle | None = None
    _last_submit: float | None = None
    _paused: int = 0

    # -- what the server calls --------------------------------------------------------------------
    def submit(self, targets: list[tuple[Target, str]]) -> None:
        """Targets touched by one save or open, each with its text's fingerprint, most urgent first."""
        if not self.enabled:
            return
        now = self.clock()
        in_burst = self._last_submit is not None and now - self._last_submit < self.burst
        self._last_submit = now
        front: list[Target] = []
        for target, fingerprint in targets:
            status = self.statuses.get(target)
            running = self._running.get(target)
            if running is not None:
                if running[0] == fingerprint:
                    continue  # already tracing this very text
                running[1].cancel()  # for older text: the new one replaces it
            elif status is not None and status.fingerprint == fingerprint and (status.state == FRESH or status.waiting):
                continue  # traced from this text already, or failing the same way on it
            if target not in front:
                front.append(target)
            self._wanted[target] = fingerprint
        if not front:
            return
        self._queue = front + [t for t in self._queue if t not in front]
        for target in front:
            self._set(target, QUEUED, keep=True)
        self.changed()
        if in_burst:
            self._wait_quiet()
        elif self._timer is None:
            self._kick()

    def forget(self, target: Target) -> None:
        """``target`` is no longer defined: no status, no queued trace."""
        self._queue = [t for t in self._queue if t != target]
        self._wanted.pop(target, None)
        if self.statuses.pop(target, None) is not None:
            self.changed()

    def inputs_changed(self, uri: str, names: set[str]) -> None:
        """Learning kept new inputs for the targets ``names`` of ``uri``: the next submit traces
        them again, though their text is the same, fresh on older inputs or failing twice the same
        way on them (a running trace goes on: it is for the same text)."""
        for target, status in self.statuses.items():
            if target.uri == uri and target.name in names and target not in self._running:
                status.fingerprint, status.failures, status.waiting = None, 0, False

    def prefer(self, uri: str) -> None:
        """The editor shows ``uri``: its queued targets go first (in their order)."""
        mine = [t for t in self._queue if t.uri == uri]
        if mine and self._queue[: len(mine)] != mine:
            self._queue = mine + [t for t in self._queue if t.uri != uri]

    def not_live(self, target: Target, why: str) -> None:
        """``target`` cannot be live (the server knew without queueing it)."""
        status = self.statuses.get(target)
        if status is not None and status.state == NOT_LIVE and status.cause == why:
            return
        self.statuses[target] = Status(NOT_LIVE, why)
        self.changed()

    def pause(self) -> None:
        """An explicit trace starts: live work yields (the running one is queued again)."""
        self._paused += 1
        self._yield_running(front=True)

    def resume(self) -> None:
        self._paused = max(self._paused - 1, 0)
        if not self._paused and self._timer is None:
            self._kick()

    def disable(self) -> None:
        """``liveShapes`` turned off: the queue empties, the running trace stops, statuses go."""
        self.enabled = False
        self._queue.clear()
        self._wanted.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for _, task in self._running.values():
            task.cancel()
        self.statuses.clear()
        self.changed()

    def enable(self) -> None:
        self.enabled = True

    def busy(self) -> bool:
        return bool(self._running) or bool(self._queue) or self._timer is not None

    async def close(self) -> None:
        self.disable()
        for _, task in list(self._running.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- the pump --------------------------------------------------------------------------------
    def _wait_quiet(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.quiet, self._quiet_over)
        # A burst: the running traces yield until the quiet period ends.
        self._yield_running(front=False)

    def _yield_running(self, front: bool) -> None:
        """Cancel the running traces and queue them again (at the ``front``, or behind the queue).
        A target submitted again is queued already (for its newer text); any other is still wanted
        for the text it was tracing, so it goes back in the queue (else it would stay "queued" with
        nothing left to run it)."""
        back = []
        for target, (fingerprint, task) in self._running.items():
            if target not in self._queue:
                self._wanted.setdefault(target, fingerprint)
                back.append(target)
            task.cancel()
        self._queue = back + self._queue if front else self._queue + back

    def _quiet_over(self) -> None:
        self._timer = None
        self._kick()

    def _kick(self) -> None:
        """Start queued traces while a slot is free (nothing while paused, in a burst or off)."""
        while (
            self._queue
            and len(self._running) < max(self.slots, 1)
            and not self._paused
            and self._timer is None
            and self.enabled
        ):
            target = self._queue.pop(0)
            fingerprint = self._wanted.pop(target, "")
            self._set(target, TRACING, keep=True)
            task = asyncio.ensure_future(self._trace(target, fingerprint))
            task.add_done_callback(functools.partial(self._task_done, target))
            self._running[target] = (fingerprint, task)
            self.started += 1
            self.changed()

    def _task_done(self, target: Target, task: asyncio.Task[None]) -> None:
        """A slot's task ended, however it did: its slot is freed and the next queued trace starts.
        Freed here, not in ``_trace``: a task cancelled before it first ran (a burst in the same
        turn of the loop as the submit that started it: a learn's end touches every open file at
        once) never runs ``_trace`` at all, and its slot was held for good, every later target
        queued (nmn: 148 targets, none traced after its learn)."""
        if self._running.get(target, (None, None))[1] is task:  # not replaced by a newer text's trace
            del self._running[target]
            status = self.statuses.get(target)
            if status is not None and status.state == TRACING:  # no outcome: queued again if still wanted
                status.state = QUEUED if target in self._queue else status.settled or QUEUED
        self._kick()

    async def _trace(self, target: Target, fingerprint: str) -> None:
        """One live trace in its slot, its outcome recorded (``_task_done`` frees the slot)."""
        task = asyncio.ensure_future(self.run(target))
        try:
            outcome = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                task.cancel()  # cancelling this slot cancels its capture (its processes are killed)
            return  # superseded, preempted or turned off: queued again if still wanted
        except Exception as exc:  # a bug of ours: the target fails, the queue goes on
            log.exception("live trace of %s failed", target.name)
            outcome = Outcome(FAILED, f"jaxlsp failed: {type(exc).__name__}: {exc}")
        self._record(target, fingerprint, outcome)
        self.changed()

    def _record(self, target: Target, fingerprint: str, outcome: Outcome) -> None:
        before = self.statuses.get(target)
        status = Status(outcome.state, outcome.cause, outcome.trace_id, fingerprint, settled=outcome.state)
        if outcome.state == FAILED:
            same = before is not None and before.settled == FAILED and before.cause == outcome.cause
            status.failures = (before.failures if same and before is not None else 0) + 1
            status.waiting = status.failures >= SAME_CAUSE_LIMIT
            if before is not None and before.trace_id:
                status.trace_id = before.trace_id  # the newest successful graph still answers hovers
        self.statuses[target] = status

    def _set(self, target: Target, state: str, keep: bool = False) -> None:
        before = self.statuses.get(target)
        if before is None:
            self.statuses[target] = Status(state)
            return
        before.state = state
        if not keep:
            before.cause = ""

    def snapshot(self) -> list[tuple[Target, Status]]:
        """Every target's status, in a stable order (by document, then name)."""
        return sorted(self.statuses.items(), key=lambda item: (item[0].uri, item[0].name))
