"""Hostile user code through the real worker and real JAX on CPU, cold and through a warm spare.

Each target in ``tests/workspaces/hostile`` misbehaves in one way: it prints (at import and at trace
time), sleeps forever (at import, and inside the traced function), calls ``os._exit``, segfaults,
allocates without bound, leaves a child, a double-forked grandchild or a daemon behind, raises at import,
raises a ``ConcretizationTypeError`` while traced, returns garbage, scribbles on the private result
pipe, or writes into its current directory. After each one:

- the error is structured, of the right kind, and names the cause (and the user's line when there
  is one); the user's stdout comes back in the logs and never corrupts the result;
- no process of the worker's group or session is left (``os.killpg(pgid, 0)`` fails, and no entry
  of ``/proc`` has that process group or session);
- the workspace is unchanged (the worker runs in a scratch directory, removed when it exits);
- the next capture of a good target succeeds (through the same spare, for the warm path).

The cold path goes through the capture service without a warm spare (:class:`jaxlsp.capture.service.CaptureService`, as the CLI's ``trace_once``) (recipe, interpreter, the real
staged worker), recording the client's :class:`CaptureOutcome` on the way; the warm path through
one :class:`SparePool` shared by the module.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from jaxlsp.capture.engine import TraceFailure, TraceOutcome, TraceRequest, finish
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.capture.launch.supervise import CaptureOutcome, _seconds
from jaxlsp.capture.service import CaptureService
from jaxlsp.graph import io
from tests.deadlines import scaled
from tests.worker.conftest import request

pytest.importorskip("jax")

FIXTURE = Path(__file__).resolve().parents[2] / "workspaces" / "hostile"
PYTHON = sys.executable
#: Address-space cap for the allocation cases, and for the good capture that proves it is enough:
#: the client's docs measure ~0.5 GB for importing jax and ~1.5 GB more for an XLA CPU client (a
#: CPU trace initialises none, so 512 MiB suffices today; 2 GiB stays safe if that changes).
MEMORY_MB = 2048
#: The hang cases' capture limits, in seconds on the reference machine: scaled when a case starts
#: (the machine of that moment, not of the module's import). Cold covers a cold jax import (~1 s).
COLD_HANG_SECONDS = 6.0
WARM_HANG_SECONDS = 5.0
SCRATCH_PREFIX = "jaxlsp-capture-"


@dataclass(frozen=True)
class Case:
    file: str
    kind: str | None = None  # None: the capture succeeds
    says: tuple[str, ...] = ()  # in the error's message
    line: int | None = None  # the user's line, in the error's frame
    primitives: tuple[str, ...] = ()  # of the graph, when it succeeds
    stdout: tuple[str, ...] = ()  # in the captured stdout (and the outcome's logs)
    stderr: tuple[str, ...] = ()  # in the captured stderr
    spawned: str | None = None  # a stdout prefix that names a pid which must be gone afterwards
    hang: bool = False  # runs under the short hang timeout
    memory: bool = False  # runs under the MEMORY_MB cap


CASES = [
    Case(
        "noisy.py",
        primitives=("cos",),
        stdout=(
            "hostile-noisy: imported\n",
            '{"ok": false, "error": {"kind": "crash", "message": "forged on stdout"}}\n',
            "hostile-noisy: tracing (3,)\n",
            "not json {",
        ),
        stderr=("hostile-noisy: to stderr\n",),
    ),
    Case(
        "hang_import.py",
        "timeout",
        says=("did not finish within", "It was running <module> at hang_import.py:7 when"),
        stdout=("hostile-hang: importing",),
        hang=True,
        line=7,
    ),
    Case(
        "hang_trace.py",
        "timeout",
        says=("did not finish within", "It was running f at hang_trace.py:9 when"),
        stdout=("hostile-hang: tracing",),
        hang=True,
        line=9,  # the worker was asleep there when the time ran out
    ),
    Case("exit_trace.py", "crash", says=("exited with status 3",), stdout=("hostile-exit: leaving",)),
    Case("segv.py", "crash", says=("SIGSEGV",), stdout=("hostile-segv: about to crash",)),
    Case("alloc_import.py", "memory", line=7, memory=True),
    Case("alloc_trace.py", "memory", memory=True),
    Case("spawn.py", primitives=("sin",), spawned="hostile-child: "),
    Case("double_fork.py", primitives=("sin",), spawned="hostile-grandchild: "),
    Case("daemon.py", primitives=("sin",), spawned="hostile-daemon: "),
    Case("raise_import.py", "import", says=("RuntimeError: hostile: the dataset is missing",), line=10),
    Case("concrete.py", "trace", says=("ConcretizationTypeError",), line=7),
    Case("garbage.py", "trace", says=("builtins.object", "not an array")),
    Case("scribble.py", "crash", says=("unreadable result",)),
    Case("writes_cwd.py", primitives=("sin",), stdout=("hostile-cwd: ",)),
]


def _params() -> list[Any]:
    # daemon.py leaves the worker's group and session (fork, setsid, fork): it is caught by the
    # capture's cgroup (as root on Linux) or re-parented to a subreaper we control (Linux).
    return [pytest.param(case, id=case.file.removesuffix(".py")) for case in CASES]


# -- processes ------------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, process group and session of ``pid``; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[2]), int(fields[3])


def _members(pgid: int) -> dict[int, str]:
    """Every process (zombies too) whose process group or session is ``pgid``: pid -> state."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := _stat(int(name))) is not None and pgid in info[1:]:
            found[int(name)] = info[0]
    return found


def assert_group_gone(pgid: int | None) -> None:
    assert pgid is not None and pgid > 1 and pgid != os.getpgrp()
    live = {pid: state for pid, state in _members(pgid).items() if state != "Z"}
    assert live == {}, f"processes left in the worker's group / session {pgid}: {live}"
    # Orphans killed with the group are re-parented to init, which reaps them at its own pace.
    deadline = time.monotonic() + scaled(10)
    while _members(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _members(pgid) == {}, f"zombies of group {pgid} were never reaped"
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def spawned_pids(case: Case, stdout: str) -> list[int]:
    if case.spawned is None:
        return []
    return [int(p) for p in re.findall(rf"^{re.escape(case.spawned)}(\d+)$", stdout, flags=re.MULTILINE)]


def still_sleeping(pid: int) -> bool:
    """Whether ``pid`` is still the ``sleep 1000`` a target started (not a zombie, not a reused pid)."""
    info = _stat(pid)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return info is not None and info[0] != "Z" and cmdline == b"sleep\x001000\x00"


def stop_strays(case: Case, *outcomes: CaptureOutcome) -> None:
    """Kill what a target started and the capture failed to stop, so that a failure leaks nothing."""
    for outcome in outcomes:
        for pid in spawned_pids(case, outcome.stdout):
            if still_sleeping(pid):
                os.kill(pid, 9)


# -- the workspace and the scratch directories ----------------------------------------------------


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root``, with a digest of each file's contents."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
        for p in sorted(root.rglob("*"))
    }


def scratch_dirs(tmp: Path) -> set[str]:
    return {p.name for p in tmp.iterdir() if p.name.startswith(SCRATCH_PREFIX)}


@dataclass
class Sandbox:
    root: Path  # a private copy of tests/workspaces/hostile
    before: dict[str, str]  # its snapshot
    tmp: Path  # TMPDIR of every worker: where their scratch directories are made


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    base = tmp_path_factory.mktemp("hostile")
    root = base / "workspace"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    tmp = base / "tmp"
    tmp.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(tmp))  # inherited by cold workers and by the spare (started below)
        yield Sandbox(root, snapshot(root), tmp)
    tempfile.tempdir = None  # Python may have cached TMPDIR's folder meanwhile: not for later tests


# -- the checks common to both paths --------------------------------------------------------------


def check(case: Case, outcome: CaptureOutcome, sandbox: Sandbox, scratch_before: set[str], timeout: float) -> None:
    """What must hold after any capture: nothing left running, the workspace as it was, the
    scratch directory gone when the worker exited on its own, and the expected result."""
    assert_group_gone(outcome.pgid)
    if case.spawned is not None:
        pids = spawned_pids(case, outcome.stdout)
        assert pids, f"the target did not report its child: {outcome.stdout!r}"
        assert [pid for pid in pids if still_sleeping(pid)] == [], f"{case.spawned}{pids} outlived the capture"
    assert snapshot(sandbox.root) == sandbox.before
    if outcome.exit_code == 0:
        assert scratch_dirs(sandbox.tmp) <= scratch_before, "the scratch directory was left behind"

    for text in case.stdout:
        assert text in outcome.stdout and text in outcome.logs, (text, outcome.logs)
    for text in case.stderr:
        assert text in outcome.stderr and text in outcome.logs, (text, outcome.logs)
    result = outcome.result
    if case.kind is None:
        assert result["ok"] is True, result.get("error")
        graph = io.from_json(result["graph"])  # the worker sends the compact form
        assert tuple(n.primitive for n in graph.nodes) == case.primitives
        assert graph.target["path"] == case.file  # relative to the workspace root
        return
    assert result["ok"] is False
    error = result["error"]
    assert error["kind"] == case.kind, error
    for text in case.says:
        assert text in error["message"], error
    if case.hang:
        assert f"within {_seconds(timeout)} s" in error["message"]  # the limit, scaled with the machine
    if case.line is not None:
        frame = error.get("frame") or {}
        assert (frame.get("path"), frame.get("line")) == (str(sandbox.root / case.file), case.line), error


# -- the cold path --------------------------------------------------------------------------------


def trace_cold(
    sandbox: Sandbox, file: str, *, timeout: float | None = None, memory_mb: int | None = None
) -> tuple[CaptureOutcome, TraceOutcome | TraceFailure]:
    """A cold capture of ``file::f`` through the capture service (the CLI's way), the real client and
    worker: the client's outcome, and the graph or the failure. ``timeout`` defaults to 60 s on the
    reference machine, scaled when the capture starts."""
    timeout = scaled(60.0) if timeout is None else timeout
    service = CaptureService(warm=False)
    options = CaptureOptions(timeout=timeout, **({"memory_mb": memory_mb} if memory_mb is not None else {}))

    async def run() -> tuple[CaptureOutcome, TraceOutcome | TraceFailure]:
        try:
            prepared = service.prepare(TraceRequest(sandbox.root / file, "f", sandbox.root))
            outcome = await service.capture(prepared, options)  # the cold path, as the CLI takes it
            try:
                return outcome, finish(prepared, outcome)
            except TraceFailure as failure:
                return outcome, failure
        finally:
            await service.close()

    captured, result = asyncio.run(run())
    assert captured.via == "cold"
    return captured, result


def assert_good_cold(sandbox: Sandbox, memory_mb: int | None = None) -> None:
    before = scratch_dirs(sandbox.tmp)
    outcome, traced = trace_cold(sandbox, "good.py", memory_mb=memory_mb)
    assert isinstance(traced, TraceOutcome), traced
    assert [n.primitive for n in traced.graph.nodes] == ["sin", "mul"]
    check(Case("good.py", primitives=("sin", "mul")), outcome, sandbox, before, 60.0)


@pytest.mark.parametrize("case", _params())
def test_cold(case: Case, sandbox: Sandbox) -> None:
    timeout = scaled(COLD_HANG_SECONDS) if case.hang else 60.0
    memory_mb = MEMORY_MB if case.memory else None
    before = scratch_dirs(sandbox.tmp)
    outcome, traced = trace_cold(sandbox, case.file, timeout=timeout, memory_mb=memory_mb)
    try:
        assert_good_cold(sandbox, memory_mb)  # the next capture (under the same cap) succeeds
        check(case, outcome, sandbox, before, timeout)
    finally:
        stop_strays(case, outcome)
    if case.kind is None:
        assert isinstance(traced, TraceOutcome)
        assert tuple(n.primitive for n in traced.graph.nodes) == case.primitives
        return
    assert isinstance(traced, TraceFailure)  # trace_once raised it, as the CLI and the server see it
    assert traced.kind == case.kind
    assert traced.message == outcome.result["error"]["message"]
    if case.line is not None:
        assert f"{case.file}:{case.line}:" in traced.paragraph()


def test_cold_failure_logs_carry_the_users_stdout(sandbox: Sandbox) -> None:
    outcome, traced = trace_cold(sandbox, "exit_trace.py")
    assert "hostile-exit: leaving" in outcome.logs
    assert isinstance(traced, TraceFailure) and traced.kind == "crash"
    assert "hostile-exit: leaving" in traced.logs


def test_cold_segfault_names_the_users_line(sandbox: Sandbox) -> None:
    outcome, _ = trace_cold(sandbox, "segv.py")
    assert outcome.result["error"]["kind"] == "crash"
    assert 'segv.py", line 6' in outcome.stderr


def test_a_worker_that_dies_leaves_no_scratch_directory(sandbox: Sandbox) -> None:
    before = scratch_dirs(sandbox.tmp)
    outcome, _ = trace_cold(sandbox, "exit_trace.py")
    assert outcome.exit_code == 3
    assert scratch_dirs(sandbox.tmp) <= before


# -- the warm spare -------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def spare(sandbox: Sandbox) -> AsyncIterator[SparePool]:
    """One real spare (the real staged worker, jax preloaded) for every warm case of the module."""
    pool = SparePool()
    assert await pool.start(PYTHON), "the warm spare did not start"
    info = pool.info(PYTHON)
    assert info is not None and "jax" in info["preloaded"]
    yield pool
    await pool.close()
    left = _stat(int(info["pid"]))
    assert left is None or left[0] == "Z", "the spare outlived its pool"


def _request(sandbox: Sandbox, file: str) -> dict[str, Any]:
    array = {"kind": "array", "shape": [3], "dtype": "float32", "generator": {"kind": "zeros"}}
    return request(file, "f", array, workspace=sandbox.root, kind="function")


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", _params())
async def test_spare(case: Case, spare: SparePool, sandbox: Sandbox) -> None:
    info = spare.info(PYTHON)
    assert info is not None
    timeout = scaled(WARM_HANG_SECONDS) if case.hang else 60.0
    memory_mb = MEMORY_MB if case.memory else None
    before = scratch_dirs(sandbox.tmp)
    outcome = await spare.capture(
        _request(sandbox, case.file), python=PYTHON, options=CaptureOptions(timeout=timeout, memory_mb=memory_mb)
    )
    assert outcome.via == "spare", outcome.result

    try:
        # The same spare serves the next capture (under the same cap), and it succeeds.
        good_before = scratch_dirs(sandbox.tmp)
        good = await spare.capture(
            _request(sandbox, "good.py"), python=PYTHON, options=CaptureOptions(memory_mb=memory_mb)
        )
        assert good.via == "spare"
        assert spare.info(PYTHON) == info  # not replaced: the same process, still ready
        check(Case("good.py", primitives=("sin", "mul")), good, sandbox, good_before, 60.0)

        check(case, outcome, sandbox, before, timeout)
        if case.file == "segv.py":  # the fork runs with faulthandler: the user's line is in the error
            assert 'segv.py", line 6' in outcome.result["error"].get("traceback", "")
    finally:
        stop_strays(case, outcome)
