"""A capture in a process that exits after it (a cold worker, a warm spare's child) holds its
jaxpr and graph to the end with the collector off (worker/process/main.py ``exiting``); one in a process
that goes on (tests, tools) frees them and leaves the collector as it was."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import scaled
from tests.worker.conftest import array, graph_of, request

pytest.importorskip("jax")

MODEL = """\
import jax.numpy as jnp


def f(x):
    return jnp.tanh(x) @ x.T
"""

EXITING = """
import gc, json, sys
from jaxlsp.worker.process import main
main.exiting()
result = main.capture(json.loads(sys.argv[1]))
print(json.dumps({"ok": result["ok"], "collector": gc.isenabled(), "held": [type(x).__name__ for x in main._HELD]}))
"""


def test_a_capture_that_the_process_outlives_frees_its_graph(tmp_path: Path, run_capture: Callable[..., Any]) -> None:
    from jaxlsp.worker.process import main

    (tmp_path / "model.py").write_text(MODEL)
    assert gc.isenabled()
    graph = graph_of(run_capture(request("model.py", "f", array(3, 4), workspace=tmp_path)))
    assert [n["primitive"] for n in graph["nodes"]][:1] == ["tanh"]
    assert main._HELD is None and gc.isenabled()


def test_a_capture_in_a_process_about_to_exit_holds_its_graph_with_the_collector_off(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    req = request("model.py", "f", array(3, 4), workspace=tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", EXITING, json.dumps(req)],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {"ok": True, "collector": False, "held": ["Traced", "Graph"]}
