"""A module imported from a folder beside the workspace (``sys.path.insert(0, "../Hlib")``) is one
of the graph's ``sources`` like any workspace file, through the real warm spare and the graph
store: an edit of it makes the kept graph stale (what hover and the lens ask), and the next
trace is the cold trace's graph (issue 45)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.capture.engine import TraceRequest
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.capture.service import CaptureService
from jaxlsp.graph import io
from jaxlsp.graph.store import GraphStore

MODEL = """\
import sys
from pathlib import Path

import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Hlib"))
from helper import WIDTH  # noqa: E402


def f(x):
    return jnp.tile(x, (1, WIDTH // 4))
"""

RECIPE = """version = 1

[profiles.p]
target = "model.py::f"
inputs.args = [{ kind = "array", shape = [4, 4] }]
"""


def _json(captured: object) -> dict[str, Any]:
    """The graph's JSON form: the store's trace read whole, or the outcome's graph (no store)."""
    trace = captured.trace  # type: ignore[attr-defined]
    if trace is None:
        return io.to_json(captured.outcome.graph)  # type: ignore[attr-defined]
    with trace.whole() as graph:
        return io.to_json(graph)


def _outputs(captured: object) -> list[list[int]]:
    graph = _json(captured)
    shapes = {v["id"]: v["shape"] for v in graph["values"]}
    return [shapes[o["value"]] for o in graph["outputs"]]


def _program(captured: object) -> str:
    graph = _json(captured)
    return json.dumps({k: graph[k] for k in ("nodes", "values", "inputs", "outputs", "sources")}, sort_keys=True)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


@pytest.fixture
def beside(tmp_path: Path) -> tuple[Path, Path]:
    """``ws/`` (the workspace) and ``Hlib/helper.py`` beside it."""
    (tmp_path / "Hlib").mkdir()
    (tmp_path / "Hlib" / "helper.py").write_text("WIDTH = 16\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text(MODEL)
    (ws / "jaxlsp.toml").write_text(RECIPE)
    return ws, tmp_path / "Hlib" / "helper.py"


async def test_a_module_beside_the_workspace_is_a_source_and_its_edit_makes_the_graph_stale(
    beside: tuple[Path, Path], jax_python: str
) -> None:
    ws, helper = beside
    request = TraceRequest(file=ws / "model.py", name="f", workspace_root=ws, profile="p", python=jax_python)
    meta = {"uri": (ws / "model.py").as_uri(), "name": "f"}
    service = CaptureService(store=GraphStore(), pool=SparePool())
    try:
        first = await service.trace(request, CaptureOptions(reuse=True), meta)
        assert _outputs(first) == [[4, 16]]
        assert first.trace is not None
        assert "../Hlib/helper.py" in first.trace.info.sources
        assert first.trace.stale_sources(_read) == []
        helper.write_text("WIDTH = 32\n")
        assert first.trace.stale_sources(_read) == [str(helper)]  # hover and the lens: not fresh
        again = await service.trace(request, CaptureOptions(reuse=True), meta)
    finally:
        await service.close()
    cold = await CaptureService(warm=False).trace(request, CaptureOptions())
    assert _outputs(again) == _outputs(cold) == [[4, 32]]
    assert _program(again) == _program(cold)
