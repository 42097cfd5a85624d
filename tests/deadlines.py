"""Deadlines in tests follow the machine, at the time they wait: every fixed wait is
``scaled(seconds)``, or a :class:`Deadline` of ``seconds`` (:func:`wait_for` for awaitables).

A wait in a test is a deadline, never a pace: it only has to be long enough that a healthy server
meets it. On a busy machine (load ~7 on 2 cores, issue 25) a fixed 10 s wait on a trace, a cancel or
a shutdown failed though nothing was wrong; with load that arrived after a test process had started
(load 8-10 on 2 cores, issue 45) a factor measured once, at the start, was too small. So:

- **The factor** (:func:`factor`) comes from a probe: a short CPU-bound loop runs for
  :data:`PROBE_SECONDS` of wall time; the share of that time the process actually got on a CPU says
  how contended the machine is (two busy processes beside a 2-core suite: about 2), and the loop's
  speed against :data:`REFERENCE_LOOPS_PER_SECOND` (this repository's CI machine, idle) says how
  slow its CPUs are. The factor is their product, never below 1, at most :data:`MAX_FACTOR`, times
  ``JAXLSP_TEST_TIMEOUT_FACTOR`` when that is set (a person on a slow laptop, or a debugger:
  ``JAXLSP_TEST_TIMEOUT_FACTOR=10``; ``.ci/run`` leaves it unset, that is 1). A probe stands for
  :data:`PROBE_TTL` seconds: the first wait that starts after that measures again, so a wait starts
  from the machine of the last half minute, and a process spins at most once per ``PROBE_TTL``,
  never once per wait.
- **A wait that runs out measures again** (:meth:`Deadline.expired`): a fresh probe (how contended
  the machine is now) and how long this machine's tasks sat in a run queue during the wait (their
  ``/proc/<pid>/task/<tid>/schedstat``, where Linux has it: load that came and went while it
  waited). When that factor grants the wait more than it had, it goes on to ``seconds`` times that
  factor; when it grants no more (not :data:`GROWTH` times as much), the wait is over. Never beyond
  ``seconds * MAX_FACTOR`` (times the environment's factor): a hung server still fails, on an idle
  machine after ``seconds``, on a loaded one when the measurement says the load cannot explain it.
- **The outermost deadline counts.** :func:`wait_for` inside another :func:`wait_for` (a test's
  ``within(client.request(...), 240)``, whose helper has a default 10 s deadline of its own) waits
  without a limit of its own: the test's deadline is the one that bounds it (issue 45: the inner
  10 s ran out first, and the test's 240 s never counted).

Only waits for the machine are scaled; a time limit that a test checks is enforced (a capture's
``timeout`` that must fire) stays what it is unless the wait around it needs room.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import subprocess
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

ENV = "JAXLSP_TEST_TIMEOUT_FACTOR"
PROBE_SECONDS = 0.2  # wall time of the calibration loop
PROBE_TTL = 30.0  # seconds a probe stands for the waits that start after it
REFERENCE_LOOPS_PER_SECOND = 2.0e7  # iterations of _spin per CPU second on the CI machine, idle
MAX_FACTOR = 20.0  # beyond this the machine is not slow but stuck: let the test say so
GROWTH = 1.05  # a wait that ran out goes on only when measuring again grants it this much more
TASKS_TTL = 1.0  # seconds a run-queue sample stands for the waits that start after it

T = TypeVar("T")


def _spin(wall: float) -> tuple[int, float]:
    """Count loop iterations for ``wall`` seconds; return them and the CPU seconds they took."""
    cpu0, end = time.process_time(), time.perf_counter() + wall
    loops = 0
    while time.perf_counter() < end:
        for _ in range(1000):
            loops += 1
    return loops, max(time.process_time() - cpu0, 1e-6)


@dataclass(frozen=True)
class Probe:
    at: float  # time.monotonic() when it was taken
    contention: float  # wall time over the CPU time the loop got: 2.0, it had half a CPU
    slowness: float  # the reference machine's loop speed over this one's

    @property
    def factor(self) -> float:
        return min(self.contention * self.slowness, MAX_FACTOR)


def probe(wall: float = PROBE_SECONDS) -> Probe:
    loops, cpu = _spin(wall)
    return Probe(time.monotonic(), max(wall / cpu, 1.0), max(REFERENCE_LOOPS_PER_SECOND / (loops / cpu), 1.0))


def measure(wall: float = PROBE_SECONDS) -> float:
    """How much longer than on the reference machine, idle, a wait should be here, now (a fresh
    probe; the environment's factor not included)."""
    return probe(wall).factor


def _from_env() -> float:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{ENV}={raw!r} is not a number (a factor such as 1, 2.5 or 10)") from None
    if not value > 0:
        raise SystemExit(f"{ENV}={raw!r} must be above 0")
    return value


TOLD = _from_env()  # the environment's factor (checked at import: a bad value stops the session)
_first = _latest = probe()  # the process's first probe (the report header) and its latest


def latest_probe(max_age: float | None = None) -> Probe:
    """The latest probe, or a new one when that is older than ``max_age`` seconds (:data:`PROBE_TTL`)."""
    global _latest
    if time.monotonic() - _latest.at > (PROBE_TTL if max_age is None else max_age):
        _latest = probe()
    return _latest


def factor() -> float:
    """How many times longer than on the reference machine, idle, a wait that starts now should be."""
    return latest_probe().factor * TOLD


def scaled(seconds: float) -> float:
    """``seconds`` of deadline on the reference machine, as long as this machine needs now.

    A fixed number for a wait that cannot be extended (a subprocess's ``timeout``); a wait in a loop
    or on an awaitable is better a :class:`Deadline` or :func:`wait_for`, which follow the machine
    while they wait."""
    return seconds * factor()


# -- run queues: how long this machine's tasks waited for a CPU -------------------------------------
Tasks = dict[int, tuple[int, int]]  # thread id -> (ns on a CPU, ns runnable but waiting for one)


def tasks() -> Tasks | None:
    """Every thread visible in ``/proc``, with its CPU time and run-queue time; None where the
    kernel keeps no such account (no ``schedstat``: not Linux, or without ``CONFIG_SCHED_INFO``)."""
    found: Tasks = {}
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone since it was listed
            continue
        for tid in threads:
            try:
                fd = os.open(f"/proc/{pid}/task/{tid}/schedstat", os.O_RDONLY)
                try:
                    ran, waited, _ = os.read(fd, 128).split()
                finally:
                    os.close(fd)
                found[int(tid)] = (int(ran), int(waited))
            except (OSError, ValueError):
                continue
    return found or None


def stretch(before: Tasks, after: Tasks) -> float | None:
    """How many times its CPU time a runnable task took between two samples: (time on a CPU + time
    waiting for one) / time on a CPU, summed over every thread (three busy loops beside one on
    2 cores: about 2); None when next to nothing ran (under 10 ms of CPU)."""
    ran = waited = 0
    for tid, (run, wait) in after.items():
        run0, wait0 = before.get(tid, (0, 0))
        if run < run0 or wait < wait0:  # a new thread under a reused id
            run0 = wait0 = 0
        ran += run - run0
        waited += wait - wait0
    if ran < 10_000_000:
        return None
    return (ran + waited) / ran


_sample: tuple[float, Tasks | None] | None = None


def _recent_tasks() -> Tasks | None:
    """A run-queue sample at most :data:`TASKS_TTL` old (reading every thread's account costs
    milliseconds: not once per wait)."""
    global _sample
    now = time.monotonic()
    if _sample is None or now - _sample[0] > TASKS_TTL:
        _sample = (now, tasks())
    return _sample[1]


# -- deadlines ------------------------------------------------------------------------------------
class Deadline:
    """A wait of ``seconds`` on the reference machine, idle, that follows this machine while it lasts.

    ``while not deadline.expired(): ...`` polls; :attr:`left` is how long to block at most before
    asking again. The wait is over only once it has had what the machine needs, measured when its
    time runs out (see the module's docstring)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.monotonic()
        self.granted = seconds * factor()
        self.most = seconds * MAX_FACTOR * TOLD
        self.remeasured: list[tuple[Probe, float | None]] = []  # each time it ran out: a probe, the stretch
        self._tasks = _recent_tasks()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    @property
    def left(self) -> float:
        """Seconds until the time granted so far runs out (0 once it has)."""
        return max(self.granted - self.elapsed, 0.0)

    def expired(self) -> bool:
        """Whether the wait is over. When the time granted so far has run out, the machine is
        measured again and the wait extended to what that measurement grants, if more."""
        if self.elapsed < self.granted:
            return False
        global _latest
        _latest = now = probe()  # the waits that start next begin from it too
        after = tasks()
        waited = stretch(self._tasks, after) if self._tasks and after else None
        self.remeasured.append((now, waited))
        wanted = now.factor if waited is None else max(now.factor, min(waited * now.slowness, MAX_FACTOR))
        grant = min(self.seconds * wanted * TOLD, self.most)
        if grant >= self.granted * GROWTH:
            self.granted = grant
        return self.elapsed >= self.granted

    def __str__(self) -> str:
        said = "".join(
            f"; then the machine: x{p.factor:.1f} now"
            + ("" if w is None else f", x{w:.1f} in run queues while it waited")
            for p, w in self.remeasured
        )
        return f"{self.seconds:g} s on the reference machine ({self.elapsed:.1f} s here{said})"


# Set, in the tasks a wait_for starts, to an event of that wait's end: a wait_for inside them is bounded by it
_OUTER: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar("jaxlsp_test_outer_wait", default=None)


async def wait_for(awaitable: Awaitable[T], seconds: float) -> T:
    """``awaitable``'s result within a :class:`Deadline` of ``seconds`` (on the reference machine,
    scaled here); :class:`TimeoutError` when the deadline is over, after cancelling it.

    Inside another ``wait_for`` (a helper's own default deadline around a request, under a test's
    longer one), this one's time does not count while the outer one waits: the outer deadline
    bounds it. Should this wait outlive the outer one (a task started inside it), its own deadline,
    counted from its start, takes over."""
    outer = _OUTER.get()
    deadline = Deadline(seconds)
    ended = asyncio.Event()
    token = _OUTER.set(ended)
    try:
        task = asyncio.ensure_future(awaitable)  # a coroutine's task starts in this context
    finally:
        _OUTER.reset(token)
    try:
        while not task.done():
            if outer is not None and not outer.is_set():
                outer_ended = asyncio.ensure_future(outer.wait())
                try:
                    await asyncio.wait({task, outer_ended}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    outer_ended.cancel()
            elif deadline.expired():
                raise TimeoutError(f"no result within {deadline}")
            else:
                await asyncio.wait({task}, timeout=deadline.left)
        return task.result()
    finally:
        ended.set()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def run(args: Sequence[str], seconds: float, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(args, **kwargs)`` within a :class:`Deadline` of ``seconds`` (on the reference
    machine, scaled here) in place of its ``timeout``: the process is killed and
    :class:`subprocess.TimeoutExpired` raised only once the deadline is over."""
    check = kwargs.pop("check", False)
    given = kwargs.pop("input", None)
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if given is not None:
        kwargs["stdin"] = subprocess.PIPE
    deadline = Deadline(seconds)
    with subprocess.Popen(args, **kwargs) as process:
        while True:
            try:  # asked again after a TimeoutExpired, communicate loses no output
                out, err = process.communicate(given, timeout=max(deadline.left, 0.01))
                break
            except subprocess.TimeoutExpired:
                given = None  # sent already (communicate refuses input once it has started)
                if deadline.expired():
                    process.kill()
                    out, err = process.communicate()
                    raise subprocess.TimeoutExpired(
                        process.args, deadline.elapsed, output=out, stderr=err
                    ) from RuntimeError(f"no exit within {deadline}")
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def describe() -> str:
    """One line for the test report's header."""
    told = f", {ENV}={os.environ.get(ENV)}" if os.environ.get(ENV) else ""
    return (
        f"jaxlsp test deadlines x{_first.factor * TOLD:.2f} at the start (measured x{_first.factor:.2f}{told}); "
        f"measured again every {PROBE_TTL:g} s and when a wait runs out"
    )
