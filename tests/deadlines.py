"""Deadlines in tests follow the machine: every fixed wait is ``scaled(seconds)``.

A wait in a test is a deadline, never a pace: it only has to be long enough that a healthy server
meets it. On a busy machine (load ~7 on 2 cores, issue 25) a fixed 10 s wait on a trace, a cancel or
a shutdown failed though nothing was wrong, so each wait is multiplied by :data:`FACTOR`:

- measured once per test process at import (a session's start): a short CPU-bound loop runs for
  :data:`PROBE_SECONDS` of wall time; the share of that time the process actually got on a CPU says
  how contended the machine is (two busy processes beside a 2-core suite: about 2), and the loop's
  speed against :data:`REFERENCE_LOOPS_PER_SECOND` (this repository's CI machine, idle) says how
  slow its CPUs are. The factor is their product, never below 1, at most :data:`MAX_FACTOR`.
- times ``JAXLSP_TEST_TIMEOUT_FACTOR`` when that is set (a person on a slow laptop, or a debugger:
  ``JAXLSP_TEST_TIMEOUT_FACTOR=10``). ``.ci/run`` leaves it unset, that is 1: CI relies on the
  measurement alone.

Only waits for the machine are scaled; a time limit that a test checks is enforced (a capture's
``timeout`` that must fire) stays what it is unless the wait around it needs room.
"""

from __future__ import annotations

import os
import time

ENV = "JAXLSP_TEST_TIMEOUT_FACTOR"
PROBE_SECONDS = 0.2  # wall time of the calibration loop, per test process
REFERENCE_LOOPS_PER_SECOND = 2.0e7  # iterations of _spin per CPU second on the CI machine, idle
MAX_FACTOR = 20.0  # beyond this the machine is not slow but stuck: let the test say so


def _spin(wall: float) -> tuple[int, float]:
    """Count loop iterations for ``wall`` seconds; return them and the CPU seconds they took."""
    cpu0, end = time.process_time(), time.perf_counter() + wall
    loops = 0
    while time.perf_counter() < end:
        for _ in range(1000):
            loops += 1
    return loops, max(time.process_time() - cpu0, 1e-6)


def measure(wall: float = PROBE_SECONDS) -> float:
    """How much longer than on the reference machine, idle, a wait should be here, now."""
    loops, cpu = _spin(wall)
    contention = max(wall / cpu, 1.0)  # 2.0: the process got half a CPU
    slowness = max(REFERENCE_LOOPS_PER_SECOND / (loops / cpu), 1.0)
    return min(contention * slowness, MAX_FACTOR)


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


MEASURED = measure()
FACTOR = MEASURED * _from_env()


def scaled(seconds: float) -> float:
    """``seconds`` of deadline on the reference machine, as long as this machine needs."""
    return seconds * FACTOR


def describe() -> str:
    """One line for the test report's header."""
    told = os.environ.get(ENV)
    return f"jaxlsp test deadlines x{FACTOR:.2f} (measured x{MEASURED:.2f}" + (f", {ENV}={told})" if told else ")")
