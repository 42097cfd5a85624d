"""The capture service's NNX / Equinox init snapshots (worker/reuse/initsnap.py) through the real warm
spare: a capture that ran the constructor is followed, in the background, by a request for the
init's snapshot; the next live capture after an edit of the forward pass uses it and gives the
graph a capture without it gives. The user's own trace never uses one, and a constructor that
reads a folder keeps none: the live re-trace after the folder changed is the cold trace's graph
(issue 45)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from jaxlsp.capture.engine import TraceRequest
from jaxlsp.capture.launch import phases
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.capture.service import CaptureService
from jaxlsp.graph import io
from tests.deadlines import scaled
from tests.worker.reuse.test_initsnap import NNX_MODEL

pytest.importorskip("flax")

RECIPE = """version = 1

[profiles.p]
target = "model.py::Model"
inputs.args = [{ kind = "array", shape = [2, 8] }]
"""


def _graph(captured: object) -> str:
    graph = io.to_json(captured.outcome.graph)  # type: ignore[attr-defined]
    return json.dumps({k: graph[k] for k in ("nodes", "values", "inputs", "outputs", "groups")})


async def test_a_snapshot_made_in_the_background_serves_the_next_capture(tmp_path: Path, jax_python: str) -> None:
    model = tmp_path / "model.py"
    model.write_text(NNX_MODEL)
    (tmp_path / "jaxlsp.toml").write_text(RECIPE)
    request = TraceRequest(file=model, name="Model", workspace_root=tmp_path, profile="p", python=jax_python)
    service = CaptureService(pool=SparePool())
    try:
        timing = phases.Phases(saved=0.0)  # as a live trace has (capture/launch/phases.py)
        phases.CURRENT.set(timing)
        first = await service.trace(request, CaptureOptions())
        phases.CURRENT.set(None)
        marked = list(timing.marks)
        assert first.outcome.capture.result.get("snapshotWanted") is True
        key = (str(model.resolve()), "Model", "p")
        deadline = asyncio.get_running_loop().time() + scaled(60)
        while not isinstance(service._hints.get(key, (None, None))[0], dict):
            assert asyncio.get_running_loop().time() < deadline, "no snapshot came back"
            await asyncio.sleep(0.02)
        assert timing.marks == marked  # the background request marked nothing on the trace's phases
        model.write_text(NNX_MODEL.replace("return finish(nnx.relu(self.lin(x)))", "return finish(self.lin(x))"))
        second = await service.trace(request, CaptureOptions(reuse=True))  # a live re-trace
        assert second.outcome.capture.result.get("hint") == "held"
        assert "snapshotWanted" not in second.outcome.capture.result
    finally:
        await service.close()
    cold = await CaptureService(warm=False).trace(request, CaptureOptions())
    assert _graph(second) == _graph(cold)
    assert len(second.outcome.graph.nodes) < len(first.outcome.graph.nodes)  # the edit (no relu) is in it


async def _settled(notes: list[str]) -> None:
    """Until the service's background request for a snapshot has ended (its note, kept or not)."""
    deadline = asyncio.get_running_loop().time() + scaled(60)
    while not any(note.startswith("init snapshot of") for note in notes):
        assert asyncio.get_running_loop().time() < deadline, "the snapshot request never ended"
        await asyncio.sleep(0.02)


def _outputs(captured: object) -> list[list[int]]:
    graph = io.to_json(captured.outcome.graph)  # type: ignore[attr-defined]
    shapes = {v["id"]: v["shape"] for v in graph["values"]}
    return [shapes[o["value"]] for o in graph["outputs"]]


async def test_the_users_own_trace_never_uses_an_init_snapshot(tmp_path: Path, jax_python: str) -> None:
    """An explicit trace always captures: even a snapshot that holds is not its init."""
    model = tmp_path / "model.py"
    model.write_text(NNX_MODEL)
    (tmp_path / "jaxlsp.toml").write_text(RECIPE)
    request = TraceRequest(file=model, name="Model", workspace_root=tmp_path, profile="p", python=jax_python)
    service = CaptureService(pool=SparePool())
    notes: list[str] = []
    service.on_note = notes.append
    try:
        await service.trace(request, CaptureOptions())
        await _settled(notes)
        assert any(" kept in " in note and " not kept " not in note for note in notes)  # one to use
        model.write_text(NNX_MODEL.replace("return finish(nnx.relu(self.lin(x)))", "return finish(self.lin(x))"))
        for _ in range(2):  # again and again: each explicit trace runs the constructor
            explicit = await service.trace(request, CaptureOptions())
            assert explicit.outcome.capture.result.get("hint") != "held"
            assert explicit.outcome.capture.result.get("snapshotWanted") is True
    finally:
        await service.close()


FOLDER_MODEL = """\
import os
from pathlib import Path

import jax.numpy as jnp
from flax import nnx

CLASSES = Path(__file__).parent / "classes"


class Model(nnx.Module):
    def __init__(self, *, rngs):
        self.head = nnx.Linear(8, len(os.listdir(CLASSES)), rngs=rngs)

    def __call__(self, x):
        return self.head(x)
"""


async def test_a_live_retrace_after_a_folder_the_constructor_lists_changed_is_the_cold_graph(
    tmp_path: Path, jax_python: str
) -> None:
    """``len(os.listdir("classes"))``: 2 files, then 3. No source file changed, but the model did."""
    model = tmp_path / "model.py"
    model.write_text(FOLDER_MODEL)
    (tmp_path / "jaxlsp.toml").write_text(RECIPE)
    (tmp_path / "classes").mkdir()
    for name in ("a", "b"):
        (tmp_path / "classes" / name).write_text("")
    request = TraceRequest(file=model, name="Model", workspace_root=tmp_path, profile="p", python=jax_python)
    service = CaptureService(pool=SparePool())
    notes: list[str] = []
    service.on_note = notes.append
    try:
        first = await service.trace(request, CaptureOptions(reuse=True))
        assert _outputs(first) == [[2, 2]]
        await _settled(notes)
        (tmp_path / "classes" / "c").write_text("")
        model.write_text(FOLDER_MODEL + "\n# saved\n")  # a save that re-traces live
        live = await service.trace(request, CaptureOptions(reuse=True))
    finally:
        await service.close()
    cold = await CaptureService(warm=False).trace(request, CaptureOptions())
    assert _outputs(cold) == [[2, 3]]
    assert _outputs(live) == [[2, 3]] and _graph(live) == _graph(cold)
