"""The cold path against a stand-in worker that misbehaves on demand: every case ends with a
classified outcome and no process of the worker's group left."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from jaxlsp.capture.launch import staging
from jaxlsp.capture.launch.client import CaptureOutcome, capture_sync, run_capture
from jaxlsp.capture.launch.options import DEFAULT_MEMORY_MB, CaptureOptions
from jaxlsp.capture.launch.staging import Stage
from tests.capture.conftest import STAND_IN, alive, assert_group_gone, make_request, watch_sleeper
from tests.deadlines import scaled

PY = sys.executable


async def test_result_comes_back_from_a_worker_in_its_own_group(stand_in: Stage) -> None:
    outcome = await run_capture(make_request("echo"), python=PY, stage=stand_in)
    assert outcome.ok and outcome.via == "cold" and outcome.exit_code == 0
    graph = outcome.result["graph"]
    assert graph["request"]["target"] == {"path": "/nowhere/model.py", "name": "echo"}
    assert graph["request"]["resultFd"] == graph["resultFd"] > 2
    assert graph["pid"] == graph["pgid"] == graph["sid"] == outcome.pgid  # own session and group
    assert graph["jaxReady"] is False
    assert outcome.python == PY and outcome.wall > 0
    assert_group_gone(outcome.pgid)


async def test_isolation_only_staged_packages_import(stand_in: Stage, bare_python: str) -> None:
    outcome = await run_capture(make_request("isolation"), python=bare_python, stage=stand_in)
    graph = outcome.result["graph"]
    assert graph["imports"] == dict.fromkeys(
        ("pygls", "lsprotocol", "libcst", "jaxlsp.discovery", "jaxlsp.server"), False
    )
    assert Path(graph["jaxlsp"]).is_relative_to(stand_in.path)
    assert Path(graph["graph"]).is_relative_to(stand_in.path)
    assert graph["path"][0] == str(stand_in.path) and graph["isolated"] == 1 and graph["bytecode"] is True
    assert "" not in graph["path"] and str(Path.cwd()) not in graph["path"]


async def test_server_checkout_stays_hidden_even_where_it_is_installed(stand_in: Stage) -> None:
    # The test interpreter has jaxlsp installed (editable): only the staged modules may import.
    outcome = await run_capture(make_request("isolation"), python=PY, stage=stand_in)
    graph = outcome.result["graph"]
    assert graph["imports"]["jaxlsp.discovery"] is False and graph["imports"]["jaxlsp.server"] is False
    assert Path(graph["jaxlsp"]).is_relative_to(stand_in.path)


async def test_user_output_comes_back_as_logs_and_the_result_stays_intact(stand_in: Stage) -> None:
    seen: list[tuple[str, str]] = []
    outcome = await run_capture(
        make_request("print"),
        python=PY,
        stage=stand_in,
        options=CaptureOptions(on_log=lambda s, t: seen.append((s, t))),
    )
    assert outcome.ok and outcome.result["graph"]["behaviour"] == "print"
    assert outcome.stdout == "hello from stdout\n" and outcome.stderr == "hello from stderr\n"
    assert "hello from stdout" in outcome.logs and "hello from stderr" in outcome.logs
    assert ("stdout", "hello from stdout\n") in seen and ("stderr", "hello from stderr\n") in seen


async def test_a_flood_of_output_neither_hangs_nor_balloons(stand_in: Stage) -> None:
    seen: list[str] = []
    outcome = await run_capture(
        make_request("flood"), python=PY, stage=stand_in, options=CaptureOptions(on_log=lambda s, t: seen.append(t))
    )
    assert outcome.ok and outcome.truncated
    assert len(outcome.stdout) < 2 * 1024 * 1024
    assert outcome.stdout.endswith("THE END\n") and "bytes of output left out" in outcome.stdout
    assert outcome.stderr == "stderr survives the flood\n"
    assert sum(map(len, seen)) < 2 * 1024 * 1024


async def test_a_result_larger_than_a_pipe_buffer_arrives_whole(stand_in: Stage) -> None:
    outcome = await run_capture(make_request("big"), python=PY, stage=stand_in)
    assert outcome.ok and len(outcome.result["graph"]["blob"]) == 8 * 1024 * 1024


async def test_the_result_pipe_follows_the_bytes_limit_and_refuses_past_it_with_the_figures(stand_in: Stage) -> None:
    """The worker refuses a result over ``limits.bytes`` itself; the client's cap follows that
    limit (a raised ``--max-bytes`` holds end to end, past the 256 MiB of a request without
    limits) and refuses what still goes past it, never cutting it: here a stand-in that does not
    check sends 8 MiB against a limit of 2 MiB."""
    from jaxlsp.capture.launch.supervise import RESULT_LIMIT, result_limit

    assert result_limit({"limits": {"bytes": 1024 * 1024 * 1024}}) > 1024 * 1024 * 1024 > RESULT_LIMIT
    assert result_limit({}) == RESULT_LIMIT
    outcome = await run_capture(make_request("big", limits={"bytes": 2 * 1024 * 1024}), python=PY, stage=stand_in)
    assert not outcome.ok and "graph" not in outcome.result
    error = outcome.result["error"]
    assert error["kind"] == "refused"
    assert error["message"].startswith("the capture's result is 8,")
    assert "over the limit of 3,145,728 bytes (3.0 MiB) of the result pipe; nothing was cut" in error["message"]
    assert "jaxlsp.limits.bytes" in error["message"] and "--max-bytes" in error["message"]


async def test_a_hang_times_out_and_takes_its_children_along(stand_in: Stage) -> None:
    # limit under test: this capture's time limit must run out (not a wait)
    outcome = await run_capture(make_request("sleep"), python=PY, stage=stand_in, options=CaptureOptions(timeout=1.5))
    error = outcome.result["error"]
    assert error["kind"] == "timeout" and "1.5 s" in error["message"]
    assert outcome.stdout.startswith("sleeping in group")
    assert_group_gone(outcome.pgid)


async def test_exit_without_result_is_a_crash_with_its_status(stand_in: Stage) -> None:
    outcome = await run_capture(make_request("exit3"), python=PY, stage=stand_in)
    error = outcome.result["error"]
    assert error["kind"] == "crash" and "status 3" in error["message"] and "about to exit" in error["message"]
    assert outcome.exit_code == 3
    assert_group_gone(outcome.pgid)


async def test_segfault_is_a_crash_naming_the_signal(stand_in: Stage) -> None:
    outcome = await run_capture(make_request("segv"), python=PY, stage=stand_in)
    error = outcome.result["error"]
    assert error["kind"] == "crash" and "SIGSEGV" in error["message"]
    assert outcome.exit_code == -11
    assert_group_gone(outcome.pgid)


@pytest.mark.skipif(sys.platform == "darwin", reason="RLIMIT_AS is not enforced on macOS")
async def test_unbounded_allocation_is_a_memory_error(stand_in: Stage) -> None:
    outcome = await run_capture(make_request("alloc"), python=PY, stage=stand_in, options=CaptureOptions(memory_mb=512))
    error = outcome.result["error"]
    assert error["kind"] == "memory" and "512 MiB" in error["message"]
    assert_group_gone(outcome.pgid)


def test_default_memory_cap_is_for_cpu_only() -> None:
    cpu, cuda = make_request("echo"), make_request("echo")
    cuda["profile"]["device"] = "cuda:0"
    assert CaptureOptions().memory_for(cpu) == DEFAULT_MEMORY_MB
    assert CaptureOptions().memory_for(cuda) is None
    for tpu in ("tpu", "tpu:0"):  # libtpu maps the chip's memory: under the cap, "Couldn't mmap" (issue 47)
        cuda["profile"]["device"] = tpu
        assert CaptureOptions().memory_for(cuda) is None
    cuda["profile"]["device"] = "cuda:0"
    assert (
        CaptureOptions(memory_mb=1024).memory_for(cuda) == 1024
        and CaptureOptions(memory_mb=None).memory_for(cpu) is None
    )


async def test_children_left_behind_are_all_killed(stand_in: Stage) -> None:
    outcome = await run_capture(make_request("fork", children=50), python=PY, stage=stand_in)
    assert outcome.ok
    children = outcome.result["graph"]["children"]
    assert len(children) == 50
    assert_group_gone(outcome.pgid)
    assert not [pid for pid in children if alive(pid)]


@pytest.mark.parametrize(("behaviour", "words"), [("closefd", "without sending a result"), ("garbage", "unreadable")])
async def test_a_broken_result_pipe_is_a_crash(stand_in: Stage, behaviour: str, words: str) -> None:
    outcome = await run_capture(make_request(behaviour), python=PY, stage=stand_in)
    assert outcome.result["error"]["kind"] == "crash" and words in outcome.result["error"]["message"]
    assert_group_gone(outcome.pgid)


async def test_a_worker_lingering_after_its_result_is_stopped_and_the_result_kept(stand_in: Stage) -> None:
    outcome = await run_capture(
        make_request("linger"), python=PY, stage=stand_in, options=CaptureOptions(timeout=scaled(30))
    )
    assert outcome.ok and outcome.result["graph"] == {"lingered": True}
    assert_group_gone(outcome.pgid)


async def test_cancel_kills_the_group_at_once(stand_in: Stage) -> None:
    cancel = asyncio.Event()
    pgid, on_log = watch_sleeper(cancel)

    with pytest.raises(asyncio.CancelledError):
        await run_capture(
            make_request("sleep"),
            python=PY,
            stage=stand_in,
            options=CaptureOptions(timeout=scaled(60), on_log=on_log, cancel=cancel),
        )
    assert_group_gone(pgid[0])


async def test_cancelling_the_task_kills_the_group_too(stand_in: Stage) -> None:
    sleeping = asyncio.Event()
    pgid, on_log = watch_sleeper(sleeping)

    task = asyncio.ensure_future(
        run_capture(make_request("sleep"), python=PY, stage=stand_in, options=CaptureOptions(on_log=on_log))
    )
    await asyncio.wait_for(sleeping.wait(), scaled(30))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_group_gone(pgid[0])


def test_a_worker_that_cannot_load_is_an_internal_error(tmp_path: Path) -> None:
    broken = staging.stage(
        extra={"stand_in_worker.py": STAND_IN}, worker_module="no_such_worker", cache_dir=tmp_path / "cache"
    )
    outcome = capture_sync(make_request("echo"), python=PY, stage=broken)
    error = outcome.result["error"]
    assert error["kind"] == "internal" and "could not be loaded" in error["message"]


def test_sync_wrapper(stand_in: Stage) -> None:
    outcome = capture_sync(make_request("echo"), python=PY, stage=stand_in)
    assert outcome.ok and outcome.result["graph"]["behaviour"] == "echo"


async def test_concurrent_captures_leak_no_descriptors(stand_in: Stage) -> None:
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    outcomes = await asyncio.gather(
        run_capture(make_request("echo"), python=PY, stage=stand_in),
        run_capture(make_request("print"), python=PY, stage=stand_in),
        run_capture(make_request("exit3"), python=PY, stage=stand_in),
        # limit under test: this capture's time limit must run out (not a wait)
        run_capture(make_request("sleep"), python=PY, stage=stand_in, options=CaptureOptions(timeout=1)),
    )
    assert [o.result.get("error", {}).get("kind") for o in outcomes] == [None, None, "crash", "timeout"]
    assert len({o.pgid for o in outcomes}) == 4
    for outcome in outcomes:
        assert_group_gone(outcome.pgid)
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


def test_capture_sync_never_formats_its_outcome(stand_in: Stage, monkeypatch: pytest.MonkeyPatch) -> None:
    # asyncio.run (3.11) formats its main task at the end, result included (service.trace_once):
    # a big graph's result as text, for nothing.
    formatted = [0]

    def counted(self: CaptureOutcome) -> str:
        formatted[0] += 1
        return "CaptureOutcome(...)"

    monkeypatch.setattr(CaptureOutcome, "__repr__", counted)
    outcome = capture_sync(make_request("big"), python=sys.executable, stage=stand_in)
    assert outcome.result["ok"] and len(outcome.result["graph"]["blob"]) == 8 * 1024 * 1024
    assert formatted == [0]
