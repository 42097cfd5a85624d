"""Fixtures for the capture client: a staged stand-in worker, interpreters, process-group checks."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.capture.launch import staging
from jaxlsp.capture.launch.staging import Stage
from tests import deadlines
from tests.deadlines import scaled

HERE = Path(__file__).parent
STAND_IN = HERE / "stand_in_worker.py"
SERVER_ONLY = ("pygls", "lsprotocol", "libcst")


@pytest.fixture(scope="session")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    """The real staging of our packages, plus the stand-in worker as the worker module."""
    return staging.stage(
        extra={"stand_in_worker.py": STAND_IN},
        worker_module="stand_in_worker",
        cache_dir=tmp_path_factory.mktemp("cache"),
    )


def _has_no_server_packages(python: str) -> bool:
    probe = "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in %r) or sys.version_info < (3, 10))"
    try:
        return (
            subprocess.run([python, "-I", "-c", probe % (SERVER_ONLY,)], timeout=scaled(30), check=False).returncode
            == 0
        )
    except OSError:
        return False


@pytest.fixture(scope="session")
def bare_python() -> str:
    """An interpreter (>= 3.10) in which none of the server's dependencies is installed."""
    candidates = [getattr(sys, "_base_executable", ""), "/usr/bin/python3", "/usr/local/bin/python3"]
    candidates += [shutil.which(n) or "" for n in ("python3.13", "python3.12", "python3.11", "python3.10", "python3")]
    for python in dict.fromkeys(c for c in candidates if c):
        if os.path.exists(python) and _has_no_server_packages(python):
            return python
    pytest.skip("no interpreter without pygls / lsprotocol / libcst on this machine")


def _jax_importable(python: str) -> bool:
    done = subprocess.run(
        [python, "-I", "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('jax') is None)"],
        timeout=scaled(30),
        check=False,
    )
    return done.returncode == 0


@pytest.fixture(scope="session")
def jax_python() -> str:
    """The test interpreter when jax is installed in it (for warm spares)."""
    if not _jax_importable(sys.executable):
        pytest.skip("jax is not installed in the test interpreter")
    return sys.executable


def make_request(behaviour: str, path: str = "/nowhere/model.py", **extra: Any) -> dict[str, Any]:
    return {
        "target": {"path": path, "name": behaviour},
        "profile": {"name": None, "device": "cpu", "seed": 0, "x64": False, "inputs": {}, "load": "module"},
        "workspaceRoot": str(HERE),
        **extra,
    }


@pytest.fixture
def request_for() -> Callable[..., dict[str, Any]]:
    return make_request


def live_members(pgid: int) -> list[int]:
    """Non-zombie processes of group ``pgid`` (zombies are the init process's to reap)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    members = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if fields[0] != b"Z" and int(fields[2]) == pgid:
                members.append(int(name))
    return members if os.path.isdir("/proc") else [pgid]


def assert_group_gone(pgid: int | None) -> None:
    assert pgid is not None and pgid > 1
    assert live_members(pgid) == [], f"processes left in group {pgid}"


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def watch_sleeper(event: asyncio.Event) -> tuple[list[int], Callable[[str, str], None]]:
    """An ``on_log`` for the stand-in's ``sleep`` behaviour: when the worker says "sleeping in
    group N", N goes into the returned list and ``event`` is set."""
    pgid: list[int] = []

    def on_log(stream: str, text: str) -> None:
        if "sleeping in group" in text:
            pgid.append(int(text.split()[-1]))
            event.set()

    return pgid, on_log


def quick_benchmark(name: str, seconds: float = 300) -> list[str]:
    """``benchmarks/NAME.py --quick`` run end to end (within ``seconds`` on the reference machine,
    a deadline that follows this one): its stdout lines. Exit 1 (a missed ratio) is fine, since a
    quick run proves nothing about speed; anything else fails with its stderr."""
    root = HERE.parents[1]
    out = deadlines.run(
        [sys.executable, str(root / "benchmarks" / f"{name}.py"), "--quick"],
        seconds,
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return out.stdout.strip().splitlines()
