"""An early worker (capture/launch/early.py): used by the capture it fits, killed when it does not fit."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from jaxlsp.capture.launch import early
from jaxlsp.capture.launch.client import spawn_cold
from jaxlsp.capture.launch.options import DEFAULT_MEMORY_MB, DEFAULT_OPTIONS
from jaxlsp.capture.launch.staging import Stage
from tests.capture.conftest import HERE, alive, assert_group_gone, make_request


def _early(stage: Stage, preload: tuple[str, ...] = ("json",), memory: int = DEFAULT_MEMORY_MB) -> early.EarlyWorker:
    return early.EarlyWorker(early.launch(sys.executable, stage, memory, str(HERE), preload))


def _capture(stage: Stage, worker: early.EarlyWorker | None, **extra: Any) -> dict[str, Any]:
    request = make_request("echo", **extra)  # its workspaceRoot is HERE: the early worker's cwd
    outcome = asyncio.run(spawn_cold(request, sys.executable, stage, DEFAULT_OPTIONS, time.monotonic(), worker))
    assert outcome.result.get("ok"), outcome.result
    graph: dict[str, Any] = outcome.result["graph"]
    return graph


def test_an_early_worker_that_fits_is_the_one_that_captures(stand_in: Stage) -> None:
    worker = _early(stand_in, preload=("jax",))
    assert worker.launched is not None
    pid = worker.launched.proc.pid
    graph = _capture(stand_in, worker)
    assert graph["pid"] == pid and graph["pgid"] == pid  # its own group, as any cold worker
    assert graph["jaxPreloaded"] and graph["early"] > 0  # imported before the request came
    assert worker.launched is None  # taken: once
    assert_group_gone(pid)


def test_an_early_worker_that_does_not_fit_is_killed_and_a_fresh_one_captures(stand_in: Stage, tmp_path: Path) -> None:
    cases: list[tuple[str, early.EarlyWorker, dict[str, Any]]] = [
        ("another memory cap", _early(stand_in, memory=DEFAULT_MEMORY_MB // 2), {}),
        ("a profile env after jax", _early(stand_in, preload=("jax",)), {"env": {"JAX_ENABLE_X64": "1"}}),
        ("another working directory", _early(stand_in), {"workspaceRoot": str(tmp_path)}),
    ]
    dead = _early(stand_in)
    assert dead.launched is not None
    os.killpg(dead.launched.proc.pid, 9)
    dead.launched.proc.wait()
    cases.append(("a dead one", dead, {}))
    for why, worker, extra in cases:
        assert worker.launched is not None
        pid = worker.launched.proc.pid
        graph = _capture(stand_in, worker, **extra)
        assert graph["pid"] != pid, why
        assert "early" not in graph, why
        assert not alive(pid), why
        assert_group_gone(pid)


def test_a_discarded_early_worker_is_gone(stand_in: Stage) -> None:
    worker = _early(stand_in)
    assert worker.launched is not None
    pid = worker.launched.proc.pid
    worker.discard()
    assert not alive(pid)
    assert_group_gone(pid)
    worker.discard()  # twice is nothing


def test_the_cli_guess_skips_recipes_that_choose_another_interpreter_env_or_device(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("import jax\nfrom flax import nnx\n\ndef f(x):\n    return x\n")
    recipe = tmp_path / "jaxlsp.toml"
    for text in (
        'version = 1\n[profiles.a]\ntarget = "model.py::f"\npython = "python3"\n',
        'version = 1\n[profiles.a]\ntarget = "model.py::f"\nenv = ["XLA_FLAGS"]\n',
        'version = 1\n[profiles.a]\ntarget = "model.py::f"\ndevice = "cuda:0"\n',
    ):
        recipe.write_text(text)
        assert early.start(model, tmp_path, python=None, device=None, recipe=None) is None, text
    assert early.start(model, tmp_path, python=None, device="cuda:0", recipe=None) is None
    assert early.start(tmp_path / "missing.py", tmp_path, python=None, device=None, recipe=None) is None
    recipe.write_text('version = 1\n[profiles.a]\ntarget = "model.py::f"\n')
    worker = early.start(model, tmp_path, python=sys.executable, device=None, recipe=None)
    assert worker is not None and worker.launched is not None
    try:
        assert worker.launched.preload == ("jax", "jax.numpy", "flax.linen", "flax.nnx")
        assert worker.launched.cwd == str(tmp_path.resolve())
        assert worker.launched.memory_mb == DEFAULT_MEMORY_MB
    finally:
        worker.discard()
    # A folder of the user's named like a framework: the user's copy must be the one imported.
    (tmp_path / "flax").mkdir()
    worker = early.start(model, tmp_path, python=sys.executable, device=None, recipe=None)
    assert worker is not None and worker.launched is not None
    try:
        assert worker.launched.preload == ("jax", "jax.numpy")
    finally:
        worker.discard()
