"""Warm spares: captures fork from a process that already imported jax; hostile captures through
the spare leave nothing behind; a dead spare is replaced; no spare means a cold capture."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.capture.launch.staging import Stage
from tests.capture.conftest import alive, assert_group_gone, make_request, watch_sleeper
from tests.deadlines import scaled


@pytest.fixture
async def pool(stand_in: Stage, jax_python: str) -> AsyncIterator[SparePool]:
    spares = SparePool(stage=stand_in)
    assert await spares.start(jax_python)
    yield spares
    await spares.close()


async def test_captures_fork_from_a_spare_that_already_imported_jax(
    pool: SparePool, jax_python: str, tmp_path: Path
) -> None:
    info = pool.info(jax_python)
    assert info is not None and "jax" in info["preloaded"]
    spare_pid = info["pid"]

    jaxed = await pool.capture(make_request("jax"), python=jax_python)
    assert jaxed.ok and jaxed.via == "spare", jaxed.result
    graph = jaxed.result["graph"]
    assert graph["jaxPreloaded"] is True and graph["jaxReady"] is True  # jax was in sys.modules already
    assert graph["equations"] == 2
    assert graph["pid"] == graph["pgid"] == graph["sid"] != spare_pid  # a fork in its own session
    assert_group_gone(jaxed.pgid)

    # Every capture is a fresh fork: user modules are imported anew and see edits.
    user = tmp_path / "usermod.py"
    user.write_text("VALUE = 1\n")
    first = await pool.capture(make_request("user", path=str(user)), python=jax_python)
    user.write_text("VALUE = 22\n")
    second = await pool.capture(make_request("user", path=str(user)), python=jax_python)
    assert first.via == second.via == "spare"
    assert (first.result["graph"]["value"], second.result["graph"]["value"]) == (1, 22)
    assert first.result["graph"]["alreadyImported"] is second.result["graph"]["alreadyImported"] is False
    assert first.result["graph"]["pid"] != second.result["graph"]["pid"]

    printed = await pool.capture(make_request("print"), python=jax_python)
    assert printed.stdout == "hello from stdout\n" and printed.stderr == "hello from stderr\n" and printed.ok


async def test_hostile_captures_through_the_spare_leave_nothing(pool: SparePool, jax_python: str) -> None:
    spare_pid = pool.info(jax_python)["pid"]  # type: ignore[index]

    # limit under test: this capture's time limit must run out (not a wait)
    hung = await pool.capture(make_request("sleep"), python=jax_python, options=CaptureOptions(timeout=1.5))
    assert hung.result["error"]["kind"] == "timeout" and "1.5 s" in hung.result["error"]["message"]
    assert_group_gone(hung.pgid)

    exited = await pool.capture(make_request("exit3"), python=jax_python)
    assert exited.result["error"]["kind"] == "crash" and "status 3" in exited.result["error"]["message"]

    crashed = await pool.capture(make_request("segv"), python=jax_python)
    assert crashed.result["error"]["kind"] == "crash" and "SIGSEGV" in crashed.result["error"]["message"]

    hoarder = await pool.capture(make_request("alloc"), python=jax_python, options=CaptureOptions(memory_mb=1024))
    assert hoarder.result["error"]["kind"] == "memory"

    forker = await pool.capture(make_request("fork", children=50), python=jax_python)
    assert forker.ok and len(forker.result["graph"]["children"]) == 50
    assert not [pid for pid in forker.result["graph"]["children"] if alive(pid)]

    garbage = await pool.capture(make_request("garbage"), python=jax_python)
    assert garbage.result["error"]["kind"] == "crash"

    flood = await pool.capture(make_request("flood"), python=jax_python)
    assert flood.ok and flood.truncated and flood.stdout.endswith("THE END\n")

    cancel = asyncio.Event()
    pgid, on_log = watch_sleeper(cancel)

    with pytest.raises(asyncio.CancelledError):
        await pool.capture(
            make_request("sleep"), python=jax_python, options=CaptureOptions(on_log=on_log, cancel=cancel)
        )

    for outcome in (hung, exited, crashed, hoarder, forker, garbage, flood):
        assert outcome.via == "spare"
        assert_group_gone(outcome.pgid)
    assert_group_gone(pgid[0])
    # The spare itself survived all of it and still serves.
    assert pool.info(jax_python)["pid"] == spare_pid  # type: ignore[index]
    assert (await pool.capture(make_request("echo"), python=jax_python)).via == "spare"


async def test_a_spare_that_died_is_replaced(pool: SparePool, jax_python: str) -> None:
    old = pool.info(jax_python)["pid"]  # type: ignore[index]
    os.kill(old, signal.SIGKILL)
    # Whether the death is noticed before or after this capture starts, the capture succeeds.
    outcome = await pool.capture(make_request("echo"), python=jax_python)
    assert outcome.ok
    for _ in range(600):
        info = pool.info(jax_python)
        if info is not None and info["pid"] != old:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("no replacement spare became ready")
    again = await pool.capture(make_request("echo"), python=jax_python)
    assert again.ok and again.via == "spare"


async def test_a_spare_preloads_the_installed_modules_captures_imported(
    pool: SparePool, jax_python: str, tmp_path: Path
) -> None:
    # The user's module imports a standard library module the spare has not: the capture's result
    # names it, the spare imports it, and the next fork starts with it (the user's module anew).
    user = tmp_path / "usermod.py"
    user.write_text("import sys\n\nVALUE = 'wave' in sys.modules\nimport wave  # noqa: E402\n")
    first = await pool.capture(make_request("user", path=str(user)), python=jax_python)
    assert first.ok and first.via == "spare" and first.result["graph"]["value"] is False, first.result
    assert "imported" not in first.result  # the server's to act on, not the caller's
    deadline = asyncio.get_running_loop().time() + scaled(30)
    while "wave" not in pool.learned(jax_python):
        assert asyncio.get_running_loop().time() < deadline, pool.learned(jax_python)
        await asyncio.sleep(0.05)
    assert "usermod" not in pool.learned(jax_python)  # never a user module
    second = await pool.capture(make_request("user", path=str(user)), python=jax_python)
    assert second.ok and second.result["graph"]["value"] is True, second.result
    assert second.result["graph"]["alreadyImported"] is False  # the user's own module is imported anew


async def test_closing_the_pool_stops_a_running_capture(pool: SparePool, jax_python: str) -> None:
    sleeping = asyncio.Event()
    pgid, on_log = watch_sleeper(sleeping)

    task = asyncio.ensure_future(
        pool.capture(
            make_request("sleep"), python=jax_python, options=CaptureOptions(on_log=on_log, timeout=scaled(60))
        )
    )
    await asyncio.wait_for(sleeping.wait(), scaled(30))
    spare_pid = pool.info(jax_python)["pid"]  # type: ignore[index]
    await pool.close()
    outcome = await asyncio.wait_for(task, scaled(30))
    assert not outcome.ok
    assert_group_gone(pgid[0])
    assert not alive(spare_pid)


async def test_without_a_usable_spare_captures_run_cold(stand_in: Stage, jax_python: str) -> None:
    pool = SparePool(stage=stand_in, preload=["no_such_module_anywhere"], required=["no_such_module_anywhere"])
    try:
        assert not await pool.start(jax_python)
        assert pool.info(jax_python) is None
        outcome = await pool.capture(make_request("echo"), python=jax_python)
        assert outcome.ok and outcome.via == "cold"
    finally:
        await pool.close()


async def test_concurrent_captures_each_get_their_own_fork(pool: SparePool, jax_python: str) -> None:
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    outcomes = await asyncio.gather(*(pool.capture(make_request("echo"), python=jax_python) for _ in range(4)))
    assert all(o.ok and o.via == "spare" for o in outcomes)
    assert len({o.result["graph"]["pid"] for o in outcomes}) == 4
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


def _standbys(spare_pid: int) -> list[int]:
    """The spare's children waiting as the next capture's (named so by the forkserver)."""
    from tests.robustness.helpers import standby, stat

    return [
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and (s := stat(int(p))) and s[1] == spare_pid and standby(int(p))
    ]


async def _one_standby(spare_pid: int, not_this: int = 0) -> int:
    deadline = asyncio.get_running_loop().time() + scaled(30)
    while True:
        found = [pid for pid in _standbys(spare_pid) if pid != not_this]
        if found:
            assert len(found) == 1, found
            return found[0]
        assert asyncio.get_running_loop().time() < deadline, "no standby forked"
        await asyncio.sleep(0.01)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process names from /proc")
async def test_the_next_capture_runs_in_a_child_forked_ahead_of_it(pool: SparePool, jax_python: str) -> None:
    """The spare forks the next capture's child before it is asked (a standby): set up in its own
    session, waiting; a capture runs there, and another standby waits for the one after."""
    spare_pid = pool.info(jax_python)["pid"]  # type: ignore[index]
    first_standby = await _one_standby(spare_pid)
    first = await pool.capture(make_request("echo"), python=jax_python)
    assert first.ok and first.via == "spare", first.result
    graph = first.result["graph"]
    assert graph["pid"] == graph["pgid"] == graph["sid"] == first_standby  # in its own session
    assert_group_gone(first.pgid)
    second_standby = await _one_standby(spare_pid, not_this=first_standby)
    second = await pool.capture(make_request("echo"), python=jax_python)
    assert second.ok and second.result["graph"]["pid"] == second_standby


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process names from /proc")
async def test_without_standbys_each_capture_is_forked_when_asked(
    stand_in: Stage, jax_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jaxlsp.worker.process.forkserver import STANDBY_ENV

    monkeypatch.setenv(STANDBY_ENV, "0")
    pool = SparePool(stage=stand_in)
    try:
        assert await pool.start(jax_python)
        spare_pid = pool.info(jax_python)["pid"]  # type: ignore[index]
        outcome = await pool.capture(make_request("echo"), python=jax_python)
        assert outcome.ok and outcome.via == "spare"
        assert _standbys(spare_pid) == []
    finally:
        await pool.close()


# -- a warm trace is a cold trace (issue 45 item 2) ---------------------------------------------------
LIBRARY_MODEL = """\
import jax.numpy as jnp
import statelib


def f(x):
    return x + jnp.zeros((4, statelib.width()))
"""


def _installed_library(tmp_path: Path, text: str) -> tuple[str, Path, dict[str, object]]:
    """An interpreter (a venv linking the runner's packages) with ``statelib`` installed in its
    site-packages, a workspace whose model uses it, and the request that traces the model."""
    from tests.capture.environments.conftest import make_venv, site_of
    from tests.worker.conftest import request

    python = make_venv(tmp_path / "venv", hide=())
    library = site_of(tmp_path / "venv") / "statelib"
    library.mkdir()
    (library / "__init__.py").write_text(text)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "model.py").write_text(LIBRARY_MODEL)
    array = {"kind": "array", "shape": [4, 1], "dtype": "float32"}
    return str(python), library / "__init__.py", request("model.py", "f", array, workspace=workspace)


def _output(outcome: object) -> list[object]:
    from jaxlsp.graph import io

    result = outcome.result  # type: ignore[attr-defined]
    assert outcome.ok, result  # type: ignore[attr-defined]
    graph = io.from_json(result["graph"])
    values = {v.id: v for v in graph.values}
    return [[values[p.value].dtype, *values[p.value].shape] for p in graph.outputs]


async def _until(done: object, what: str) -> None:
    from tests.deadlines import Deadline

    deadline = Deadline(60)
    while not done():  # type: ignore[operator]
        assert not deadline.expired(), f"{what} within {deadline}"
        await asyncio.sleep(0.05)


async def test_an_installed_library_changed_on_disk_retires_the_spare(tmp_path: Path) -> None:
    """A library the spare preloaded (learned from a capture) is upgraded on disk: the next warm
    capture gives what a cold one gives, not the graph of the code the spare had imported."""
    from jaxlsp.capture.launch.client import run_capture

    python, library, request = _installed_library(tmp_path, "WIDTH = 16\n\n\ndef width():\n    return WIDTH\n")
    pool = SparePool()
    options = CaptureOptions(timeout=scaled(120))
    try:
        assert await pool.start(python)
        spare_pid = pool.info(python)["pid"]  # type: ignore[index]
        first = await pool.capture(request, python, options)
        assert first.via == "spare" and _output(first) == [["float32", 4, 16]]
        await _until(lambda: "statelib" in pool.learned(python), "the spare preloads statelib")
        preloaded = await pool.capture(request, python, options)
        assert preloaded.via == "spare" and _output(preloaded) == [["float32", 4, 16]]

        library.write_text("WIDTH = 32\n\n\ndef width():\n    return WIDTH\n")  # the upgrade, in place
        cold = await run_capture(request, python, options)
        assert _output(cold) == [["float32", 4, 32]]
        for _ in range(2):  # the one that finds the change, and the next (a fresh spare, or cold)
            again = await pool.capture(request, python, options)
            assert _output(again) == _output(cold), again.via
        await _until(lambda: (pool.info(python) or {}).get("pid") not in (None, spare_pid), "a new spare")
        for _ in range(2):  # imported by the capture, then preloaded anew by the new spare
            warm = await pool.capture(request, python, options)
            assert warm.via == "spare" and _output(warm) == _output(cold)
            await _until(lambda: "statelib" in pool.learned(python), "the new spare preloads the new statelib")
    finally:
        await pool.close()


async def test_a_library_whose_import_state_differs_in_the_spare_is_not_preloaded(tmp_path: Path) -> None:
    """A library that reads where it is imported from (here ``sys.path``: the spare's has no
    workspace on it) into module-level state: every warm capture equals a cold one, so the spare
    does not keep it preloaded."""
    from jaxlsp.capture.launch.client import run_capture

    text = "import sys\n\nWIDTH = len(sys.path)\n\n\ndef width():\n    return WIDTH\n"
    python, _library, request = _installed_library(tmp_path, text)
    pool = SparePool()
    options = CaptureOptions(timeout=scaled(120))
    try:
        assert await pool.start(python)
        cold = await run_capture(request, python, options)
        first = await pool.capture(request, python, options)
        assert first.via == "spare" and _output(first) == _output(cold), (first.result, cold.result)
        await _until(
            lambda: "statelib" in pool.learned(python) or "statelib" in pool.refused(python), "the preload is done"
        )
        for _ in range(2):
            again = await pool.capture(request, python, options)
            assert _output(again) == _output(cold), again.via
        assert "statelib" in pool.refused(python) and "statelib" not in pool.learned(python)
        await _until(lambda: pool.info(python) is not None, "a new spare")
        warm = await pool.capture(request, python, options)
        assert warm.via == "spare" and _output(warm) == _output(cold)
        assert "statelib" not in pool.learned(python)  # the new spare was not sent it again
    finally:
        await pool.close()
