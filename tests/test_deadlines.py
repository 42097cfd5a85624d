"""Every fixed wait in the tests follows the machine (issue 25): it is written ``scaled(seconds)``
(``tests/deadlines.py``), and the factor can be raised from the environment.

The scan below is what keeps it so: a new ``timeout=10`` or ``asyncio.wait_for(x, 10)`` fails here
with its file and line. A time limit that a test expects to fire (a capture's ``timeout`` of 1 s
whose point is to run out) is not a wait: the line above it says ``# limit under test``. The VS
Code and browser page helpers scale inside (``# scaled inside`` above them, in
``tests/clients/vscode/conftest.py`` and ``tests/viewer/conftest.py``), so the page waits in
``tests/clients/vscode/test_*.py`` stay plain numbers; so does ``within(awaitable, seconds)``
(``tests/server/conftest.py``).

Waits follow the machine at the time they wait (issue 45): the factor is measured again for the
waits that start after the load arrived, a wait that runs out measures again and goes on when the
machine now needs more (up to a cap), and the outermost deadline is the one that counts: a test's
``within(client.request(...), 240)`` ran out after the helper's own 10 s. The tests below check each
with a machine the test sets (a probe that says what the test wants), and with real CPU-bound
processes started beside a fresh interpreter (bounded: 60 s at most, killed when the check ends).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests import deadlines

TESTS = Path(__file__).resolve().parent
NUMBER = r"\d+(?:\.\d+)?"
FIXED_WAITS = [
    re.compile(rf"\btimeout=(?:{NUMBER})(?=[,)\s])"),
    re.compile(rf"\btimeout: float = {NUMBER}[,)]"),
    re.compile(rf"asyncio\.wait_for\(.*, {NUMBER}\)"),
    re.compile(rf"time\.monotonic\(\) \+ {NUMBER}\b"),
    re.compile(rf"^\s*[A-Z_]*TIMEOUT = {NUMBER}\b"),
]
SCALED_INSIDE = ("clients/vscode/test_",)


def test_no_fixed_wait_is_left_unscaled() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel.startswith("workspaces/") or rel in ("deadlines.py", "test_deadlines.py"):
            continue
        if rel.startswith(SCALED_INSIDE):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            above = lines[number - 2] if number > 1 else ""
            if above.strip().startswith(("# limit under test", "# scaled inside")):
                continue
            if any(pattern.search(line) for pattern in FIXED_WAITS):
                found.append(f"tests/{rel}:{number}: {line.strip()}")
    assert found == [], "fixed waits (write scaled(seconds), from tests.deadlines):\n" + "\n".join(found)


def _scaled_at_import(tree: ast.Module) -> list[int]:
    """Lines of ``scaled(...)`` calls run when the module is imported: in a module's or a class's
    own statements, or a function's default values."""

    def calls(node: ast.AST) -> list[int]:
        return [
            n.lineno
            for n in ast.walk(node)
            if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "scaled"
        ]

    def run_now(body: list[ast.stmt]) -> list[int]:
        found = []
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [
                    line
                    for default in (*stmt.args.defaults, *stmt.args.kw_defaults)
                    if default
                    for line in calls(default)
                ]
            elif isinstance(stmt, ast.ClassDef):
                found += run_now(stmt.body)
            elif isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody"):
                    found += run_now(getattr(stmt, field, []))
                for handler in getattr(stmt, "handlers", []):
                    found += run_now(handler.body)
            else:
                found += calls(stmt)
        return found

    return run_now(tree.body)


def test_no_wait_is_scaled_when_its_module_is_imported() -> None:
    """A factor taken at import is the machine of the session's start, not of the wait (issue 45):
    ``TIMEOUT = scaled(30)`` or ``def f(timeout=scaled(60))`` stays what it was when load arrives
    later. Write seconds on the reference machine and scale them at the wait."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel.startswith("workspaces/"):
            continue
        text = path.read_text(encoding="utf-8")
        if "scaled" not in text:
            continue
        lines = text.splitlines()
        found += [f"tests/{rel}:{n}: {lines[n - 1].strip()}" for n in _scaled_at_import(ast.parse(text))]
    assert found == [], "waits scaled at import (scale them where they wait):\n" + "\n".join(found)


def _factor(env_value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != deadlines.ENV}
    if env_value is not None:
        env[deadlines.ENV] = env_value
    code = "from tests import deadlines; print(deadlines.factor(), deadlines.latest_probe().factor)"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=deadlines.scaled(60),
        check=False,
    )


def test_the_factor_is_measured_and_multiplied_by_the_environment() -> None:
    plain = _factor(None)
    assert plain.returncode == 0, plain.stderr
    factor, measured = map(float, plain.stdout.split())
    assert factor == measured and 1.0 <= measured <= deadlines.MAX_FACTOR
    tenfold = _factor("10")
    assert tenfold.returncode == 0, tenfold.stderr
    factor, measured = map(float, tenfold.stdout.split())
    assert factor == measured * 10


def test_a_bad_factor_is_named() -> None:
    for value in ("fast", "0", "-2"):
        done = _factor(value)
        assert done.returncode != 0
        assert f"{deadlines.ENV}={value!r}" in done.stderr, done.stderr


# -- the outermost deadline counts (issue 45: within(client.request(...), 240) ran out after 10 s) --
async def test_a_tests_own_deadline_counts_over_a_helpers_shorter_one() -> None:
    from tests.server.conftest import within

    async def helper() -> str:  # a helper with a short deadline of its own, as client.request has
        return await within(asyncio.sleep(0.3, "answered"), 0.001)

    assert await within(helper(), 60) == "answered"
    with pytest.raises(TimeoutError):  # alone, the helper's deadline is its own
        await helper()


async def test_client_request_under_a_tests_deadline_waits_as_long_as_the_test_says() -> None:
    from tests.server.conftest import JaxClient, within

    answers = SimpleNamespace(send_request_async=lambda method, params: asyncio.sleep(0.3, {"method": method}))
    client = cast(JaxClient, SimpleNamespace(protocol=answers))
    assert await within(JaxClient.request(client, "jaxlsp/trace", {}, 0.001), 60) == {"method": "jaxlsp/trace"}


async def test_a_wait_begun_under_a_deadline_that_has_ended_keeps_its_own() -> None:
    from tests.server.conftest import within

    started: list[asyncio.Future[None]] = []

    async def start_one() -> None:  # outlives the wait it was started in
        started.append(asyncio.ensure_future(within(asyncio.sleep(60), 0.001)))

    await within(start_one(), 60)
    with pytest.raises(TimeoutError):
        await within(started[0], 60)


# -- a wait follows the machine while it waits ------------------------------------------------------
@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The machine as the deadlines see it, set by the test: the probes that the next measurements
    find (contention, in order; the last one stays), and run-queue samples (none: no account)."""
    said: list[Any] = [[1.0], []]  # contentions, run-queue samples

    def probe(wall: float = deadlines.PROBE_SECONDS) -> deadlines.Probe:
        contentions = said[0]
        return deadlines.Probe(time.monotonic(), contentions.pop(0) if len(contentions) > 1 else contentions[0], 1.0)

    monkeypatch.setattr(deadlines, "probe", probe)
    monkeypatch.setattr(deadlines, "tasks", lambda: said[1].pop(0) if said[1] else None)
    monkeypatch.setattr(deadlines, "_latest", deadlines.Probe(time.monotonic(), 1.0, 1.0))
    monkeypatch.setattr(deadlines, "_sample", None)
    return said


def test_a_wait_that_runs_out_follows_load_that_arrived_while_it_waited(machine: list[Any]) -> None:
    machine[0] = [5.0]  # the machine became five times as busy after the wait began
    deadline = deadlines.Deadline(0.1)
    assert deadline.granted == pytest.approx(0.1 * deadlines.TOLD)
    while not deadline.expired():
        time.sleep(0.005)
    # Ran out at 0.1 s, measured x5: went on to 0.5 s; measured x5 again: no more, it is over.
    assert [p.contention for p, _ in deadline.remeasured] == [5.0, 5.0]
    assert deadline.granted == pytest.approx(0.5 * deadlines.TOLD)
    assert deadline.elapsed >= deadline.granted


async def test_an_answer_that_comes_in_the_extended_time_is_taken(machine: list[Any]) -> None:
    machine[0] = [5.0]
    assert await deadlines.wait_for(asyncio.sleep(0.3, "answered"), 0.1) == "answered"


def test_load_that_came_and_went_while_it_waited_extends_it(machine: list[Any]) -> None:
    # Run queues: over the wait, the threads ran 1 s and waited 3 s for a CPU (x4); by the time it
    # runs out the machine is idle again (the probe says x1).
    machine[1] = [{1: (0, 0), 2: (5, 5)}, {1: (10**9, 3 * 10**9), 2: (5, 5)}]
    deadline = deadlines.Deadline(0.05)
    while not deadline.expired():
        time.sleep(0.005)
    assert deadline.remeasured[0][1] == pytest.approx(4.0)
    assert deadline.granted == pytest.approx(0.2 * deadlines.TOLD)


def test_a_hung_wait_ends_at_the_cap_however_busy_the_machine_gets(machine: list[Any]) -> None:
    machine[0] = [2.0, 4.0, 8.0, 16.0, 32.0, 64.0]  # busier each time it is measured
    deadline = deadlines.Deadline(0.01)
    while not deadline.expired():
        time.sleep(0.002)
    assert deadline.granted == pytest.approx(0.01 * deadlines.MAX_FACTOR * deadlines.TOLD)
    assert len(deadline.remeasured) == 6  # x2, x4, x8, x16, x20 (the cap), and x20 again: over


async def test_a_hung_awaitable_is_cancelled_at_the_deadline(machine: list[Any]) -> None:
    never = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError, match=r"no result within 0.05 s on the reference machine"):
        await deadlines.wait_for(never, 0.05)
    assert never.cancelled()


def test_a_process_that_ends_in_the_extended_time_is_taken(machine: list[Any]) -> None:
    machine[0] = [20.0]  # 0.1 s granted at first; when it runs out, the machine is measured x20: 2 s
    done = deadlines.run(["sh", "-c", "sleep 0.5; echo done"], 0.1, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "done\n"


def test_a_process_past_its_deadline_is_killed(machine: list[Any]) -> None:
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        deadlines.run(["sh", "-c", "echo started; exec sleep 60"], 0.05, capture_output=True, text=True)
    assert raised.value.stdout == "started\n"  # what it wrote before is kept


def test_the_run_queues_measure_load_on_this_machine() -> None:
    before = deadlines.tasks()
    if before is None:
        pytest.skip("no per-thread schedstat here (not Linux, or a kernel without CONFIG_SCHED_INFO)")
    with busy(3 * (os.cpu_count() or 1)):
        deadlines._spin(0.5)
    after = deadlines.tasks()
    assert after is not None
    waited = deadlines.stretch(before, after)
    assert waited is not None and waited > 1.5, waited


LOAD_ARRIVES = """
import os, sys
from tests import deadlines
from tests.test_deadlines import busy

deadlines.PROBE_TTL = 0.0  # measure at every wait: the load below arrives after the import
before = deadlines.scaled(1.0)
deadline = deadlines.Deadline(0.01)  # begins from the last probe (the load is not there yet)
# three per CPU, and three per process already running: on a machine that is busy already (the
# suite beside three CPU-bound processes) three per CPU raised the factor by only 1.4x
with busy(3 * max(os.cpu_count() or 1, round(os.getloadavg()[0]))):
    after = deadlines.scaled(1.0)
    while not deadline.expired():
        pass
print(before, after, deadline.remeasured[0][0].factor * deadlines.TOLD)
"""


def test_the_factor_follows_load_that_arrives_after_the_process_started() -> None:
    """A fresh interpreter measures at import, then CPU-bound processes start beside it (three per
    CPU or per process already running, for at most 60 s): the next wait and a wait that runs out
    measure them."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_ARRIVES],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=deadlines.scaled(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    before, after, ran_out = map(float, done.stdout.split())
    top = deadlines.MAX_FACTOR * deadlines.TOLD
    assert after > 1.5 * before or after == top, (before, after)
    assert ran_out > 1.5 * before or ran_out == top, (before, ran_out)


SPIN = "import time\nprint(flush=True)\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def busy(count: int) -> Iterator[None]:
    """``count`` CPU-bound processes, running (each has said so) until the block ends (60 s at most)."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE) for _ in range(count)]
    try:
        for spinner in spinners:
            assert spinner.stdout is not None
            spinner.stdout.readline()
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
