"""Where a live trace's time goes, from the save to the status that says it is fresh.

A live trace carries one :class:`Phases` in a context variable (set for the trace's task by
jaxlsp/server/features/live.py; the capture tasks it starts inherit it). The server's side marks the moments it
passes (``mark``): the save heard, its targets queued, the trace started, prepared, past the
gate, through the spare's fork, the result read, the child reaped, decoded, stored, published.
The worker's own durations (import, init, trace, build, serialize) and the child's clock (when it
was forked, when its result was ready) come back in its result and fill the span between the fork
and the result. Outside a live trace ``mark`` does nothing (the CLI, the benchmarks). No pygls and no jax here;
the live feature logs :func:`summary` once per trace
(``window/logMessage``), which is how ``benchmarks/live.py`` reads each round's phases.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: the worker's durations shown, in order, with the names the summary gives them
WORKER_PHASES = (
    ("jax", "jax"),
    ("import", "import"),
    ("init", "init"),
    ("trace", "make_jaxpr"),
    ("build", "build"),
    ("serialize", "json"),
)


@dataclass
class Phases:
    """The moments one live trace passed (monotonic seconds, system-wide on Linux and macOS)."""

    saved: float
    marks: list[tuple[str, float]] = field(default_factory=list)
    worker: dict[str, float] = field(default_factory=dict)  # the traced child's own durations
    clock: dict[str, float] = field(default_factory=dict)  # the traced child's forked / done moments
    # what this trace took from an earlier one instead of making it (``init (held)``: a structure
    # hint or an init snapshot; a moved graph shows as the ``moved`` span): the summary names them
    # so that a reader (benchmarks/freshness.py) can tell a reused re-trace from a rebuilt one
    reused: list[str] = field(default_factory=list)

    def mark(self, name: str, at: float | None = None) -> None:
        self.marks.append((name, time.monotonic() if at is None else at))

    def took(self, worker: Mapping[str, Any] | None, clock: Mapping[str, Any] | None) -> None:
        """The traced child's timings and clock."""
        self.worker = {k: float(v) for k, v in (worker or {}).items() if isinstance(v, int | float)}
        self.clock = {k: float(v) for k, v in (clock or {}).items() if isinstance(v, int | float)}

    def spans(self) -> list[tuple[str, float]]:
        """(phase, seconds) in order: each mark's name is the span that ended at it. The span that
        ended at ``result`` is split into the child's: its start after the previous mark (``child
        start``, zero when the child began before the server heard of the fork), then every worker
        phase (0 when the worker did not report it), then the rest of the child's time (``worker
        other``), then from its result being ready to the server having read it (``to server``).

        Every live trace names the same phases: a server that heard the spare announce the fork
        only after the child had finished (a busy loop, the machine loaded) has its ``fork`` mark
        moved back to the fork on the child's clock; a capture without that clock (a cold one, no
        warm spare to fork it: no ``fork`` either, so ``fork`` is 0) counts its process's start
        before the worker's phases as ``child start``."""
        out: list[tuple[str, float]] = []
        before = self.saved
        forked, done = self.clock.get("forked", 0.0), self.clock.get("done", 0.0)
        marks = self._on_the_childs_clock(forked, done)
        last = max((i for i, (name, _) in enumerate(marks) if name == "result"), default=-1)
        for index, (name, at) in enumerate(marks):
            if index != last:  # an earlier result (a hinted trace whose check disagreed) stays whole
                out.append((name, max(at - before, 0.0)))
                before = at
                continue
            span = max(at - before, 0.0)
            shown = sum(self.worker.get(key, 0.0) for key, _ in WORKER_PHASES)
            if not any(mark == "fork" for mark, _ in marks):
                out.append(("fork", 0.0))
            if 0.0 < forked <= done <= at and before <= done:
                begun = max(forked, before)
                start, other, to_server = begun - before, max(done - begun - shown, 0.0), at - done
            else:  # no clock from the child: all of the span but its phases came before them
                start, other, to_server = max(span - shown, 0.0), 0.0, 0.0
            out.append(("child start", start))
            out += [(label, self.worker.get(key, 0.0)) for key, label in WORKER_PHASES]
            out += [("worker other", other), ("to server", to_server)]
            before = at
        return out

    def _on_the_childs_clock(self, forked: float, done: float) -> list[tuple[str, float]]:
        """The marks, those before ``result`` that the server passed only after the child had
        finished moved back to the child's fork (at the earliest the mark before them)."""
        names = [name for name, _ in self.marks]
        if not 0.0 < forked <= done or "result" not in names:
            return list(self.marks)
        end = len(names) - 1 - names[::-1].index("result")  # the child the clock is of: the last
        out: list[tuple[str, float]] = []
        previous = self.saved
        for index, (name, at) in enumerate(self.marks):
            if index < end and at > done:
                at = max(forked, previous)
            out.append((name, at))
            previous = at
        return out

    def total(self) -> float:
        return (self.marks[-1][1] if self.marks else self.saved) - self.saved


CURRENT: contextvars.ContextVar[Phases | None] = contextvars.ContextVar("jaxlsp_live_phases", default=None)


def mark(name: str) -> None:
    """Mark ``name`` on the live trace this task runs (nothing outside a live trace)."""
    phases = CURRENT.get()
    if phases is not None:
        phases.mark(name)


def reused(what: str) -> None:
    """Note that the trace this task runs took ``what`` from an earlier one (nothing outside one)."""
    phases = CURRENT.get()
    if phases is not None:
        phases.reused.append(what)


def summary(name: str, state: str, phases: Phases, kind: str = "live") -> str:
    """One line: ``live NAME fresh in 0.84 s: discover 0.010 · wait 0.000 · ...`` (``kind`` is
    ``trace`` for the user's own request, whose first span is ``prepare``), ending with
    ``· reused init (held)`` when the trace took something from an earlier one."""
    spans = " · ".join(f"{label} {seconds:.3f}" for label, seconds in phases.spans())
    if phases.reused:
        spans += " · reused " + ", ".join(phases.reused)
    return f"{kind} {name} {state} in {phases.total():.3f} s: {spans}"
