"""A watchdog for the event loop (diagnostics, off unless ``JAXLSP_LOOP_WATCH`` is set).

``JAXLSP_LOOP_WATCH=50`` makes the server log, at WARNING, every time its event loop went more than
50 ms without running a callback: how long; how much of that each thread spent on the CPU (the
loop's own work when its thread's share is close to the whole; another thread's when that one
held the GIL meanwhile; none of them when the process waited for a CPU of a busy machine); the
cyclic garbage collector's passes meanwhile (generation, duration, thread); and the loop thread's
stacks, sampled every few milliseconds by a thread of its own (``sys._current_frames``), the most
frequent first (a stack ending in ``select`` is a loop waiting to get the GIL back). This is
how the hostile-workspace soak (``benchmarks/soak.py --watch``) found what held hovers (issue 25);
docs/reliability.md has what it showed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
ENV = "JAXLSP_LOOP_WATCH"
BEAT = 0.005  # seconds between two heartbeats of the loop, and two looks of the watching thread
MAX_FRAMES = 14  # innermost frames of a sampled stack that are kept
SHOWN_STACKS = 3  # distinct stacks shown per stall
GC_SHOWN = 0.005  # seconds: collections at least this long are named in a stall's line


@dataclass
class Stall:
    started: float  # the loop's last heartbeat before it
    cpu_at_start: dict[str, float]  # each thread's CPU seconds when the stall was seen
    samples: Counter[tuple[str, ...]] = field(default_factory=Counter)
    late_looks: int = 0  # looks of the watcher that came over a beat late (it waited for the GIL)


class LoopWatch:
    """Heartbeats from the loop, looks from a thread; one log line per stall over ``threshold``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threshold: float) -> None:
        self.loop = loop
        self.threshold = threshold
        self.thread_id = threading.get_ident()  # made in the loop's thread
        self.beat = time.monotonic()
        self.collections: list[tuple[float, float, int, str]] = []  # (start, seconds, generation, thread)
        self._gc_started: dict[int, float] = {}
        self._stop = threading.Event()
        self._handle: asyncio.TimerHandle | None = None
        self._thread = threading.Thread(target=self._watch, name="jaxlsp-loopwatch", daemon=True)

    def start(self) -> None:
        self._heartbeat()
        gc.callbacks.append(self._on_gc)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)

    def _heartbeat(self) -> None:
        self.beat = time.monotonic()
        self._handle = self.loop.call_later(BEAT, self._heartbeat)

    def _cpu(self) -> dict[str, float]:
        """Each Python thread's CPU seconds so far, by name (the loop's thread as ``loop``)."""
        out: dict[str, float] = {}
        if not hasattr(time, "pthread_getcpuclockid"):
            return out
        for thread in threading.enumerate():
            if thread.ident is None or thread is self._thread:
                continue
            try:
                seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except OSError:  # ended meanwhile
                continue
            out["loop" if thread.ident == self.thread_id else thread.name] = seconds
        return out

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            self._gc_started[ident] = time.monotonic()
            return
        began = self._gc_started.pop(ident, None)
        if began is not None:
            took = time.monotonic() - began
            if took >= GC_SHOWN:
                name = "loop" if ident == self.thread_id else threading.current_thread().name
                self.collections.append((began, took, int(info.get("generation", -1)), name))
                del self.collections[:-64]

    def _watch(self) -> None:
        stall: Stall | None = None
        last_look = time.monotonic()
        cpu = self._cpu()  # as of the last look that saw the loop running
        while not self._stop.wait(BEAT):
            now = time.monotonic()
            late = now - last_look > 3 * BEAT
            last_look = now
            beat = self.beat
            if now - beat > self.threshold:
                if stall is None or stall.started != beat:
                    if stall is not None:
                        self._report(stall, beat)
                    stall = Stall(beat, cpu)
                stall.late_looks += late
                frame = sys._current_frames().get(self.thread_id)
                if frame is not None:
                    stall.samples[_stack(frame)] += 1
            else:
                if stall is not None:
                    self._report(stall, beat)
                    stall = None
                cpu = self._cpu()

    def _report(self, stall: Stall, ended: float) -> None:
        held = ended - stall.started
        if held <= self.threshold:
            return
        now = self._cpu()
        used = {name: now[name] - before for name, before in stall.cpu_at_start.items() if name in now}
        busy = sorted(((s, n) for n, s in used.items() if s >= 0.005 or n == "loop"), reverse=True)
        cpu = ", ".join(f"{name} {seconds * 1000:.0f} ms" for seconds, name in busy)
        collections = [c for c in self.collections if c[0] + c[1] >= stall.started and c[0] <= ended]
        gcs = ", ".join(f"gen {g} {s * 1000:.0f} ms in {who}" for _, s, g, who in collections) or "none"
        total = sum(stall.samples.values())
        stacks = "".join(
            f"\n  {count}/{total} samples:\n    " + "\n    ".join(stack)
            for stack, count in stall.samples.most_common(SHOWN_STACKS)
        )
        log.warning(
            "loop held %.0f ms (threads on CPU meanwhile: %s; %d late looks; collections: %s)%s",
            held * 1000,
            cpu,
            stall.late_looks,
            gcs,
            stacks,
        )


def _stack(frame: Any) -> tuple[str, ...]:
    summary = traceback.extract_stack(frame)[-MAX_FRAMES:]
    return tuple(f"{_short(f.filename)}:{f.lineno} {f.name}" for f in summary)


def _short(path: str) -> str:
    for marker in ("/jaxlsp/", "/site-packages/", "/lib/python"):
        at = path.rfind(marker)
        if at >= 0:
            return path[at + 1 :]
    return path


def threshold_from_env() -> float | None:
    """``JAXLSP_LOOP_WATCH`` in milliseconds, as seconds; None when unset or not a positive number."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw) / 1000
    except ValueError:
        log.warning("%s=%r is not a number of milliseconds: the loop is not watched", ENV, raw[:40])
        return None
    return value if value > 0 else None


@contextlib.contextmanager
def watching() -> Iterator[LoopWatch | None]:
    """Watch the running loop for the block when ``JAXLSP_LOOP_WATCH`` asks for it."""
    threshold = threshold_from_env()
    if threshold is None:
        yield None
        return
    watch = LoopWatch(asyncio.get_running_loop(), threshold)
    watch.start()
    try:
        yield watch
    finally:
        watch.stop()
