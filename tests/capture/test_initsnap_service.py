"""The capture service's NNX / Equinox init snapshots (worker/reuse/initsnap.py) through the real warm
spare: a capture that ran the constructor is followed, in the background, by a request for the
init's snapshot; the next capture after an edit of the forward pass uses it and gives the graph a
capture without it gives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from jaxlsp.capture import phases
from jaxlsp.capture.engine import TraceRequest
from jaxlsp.capture.options import CaptureOptions
from jaxlsp.capture.service import CaptureService
from jaxlsp.capture.spare import SparePool
from jaxlsp.graph import io
from tests.capture.worker.reuse.test_initsnap import NNX_MODEL
from tests.deadlines import scaled

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
        timing = phases.Phases(saved=0.0)  # as a live trace has (capture/phases.py)
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
        second = await service.trace(request, CaptureOptions())
        assert second.outcome.capture.result.get("hint") == "held"
        assert "snapshotWanted" not in second.outcome.capture.result
    finally:
        await service.close()
    cold = await CaptureService(warm=False).trace(request, CaptureOptions())
    assert _graph(second) == _graph(cold)
    assert len(second.outcome.graph.nodes) < len(first.outcome.graph.nodes)  # the edit (no relu) is in it
