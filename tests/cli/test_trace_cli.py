"""``jaxlsp trace`` and ``jaxlsp export`` through the console script, on real JAX (CPU)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from jaxlsp.graph import io
from jaxlsp.graph.validate import SCHEMA_PATH, check
from tests.cli.helpers import run
from tests.discovery.helpers import write_tree

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cnn_graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("cnn")
    result = run(
        ["trace", "examples/linen_cnn.py::CNN", "-o", str(out / "cnn.json"), "--html", str(out / "cnn.html")], cwd=ROOT
    )
    return out, result


def test_trace_writes_a_valid_graph_and_prints_a_summary(
    cnn_graph: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, result = cnn_graph
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "cnn.json").read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    graph = io.from_json(data)
    assert check(graph) == []
    assert graph.target["name"] == "CNN" and graph.profile["name"] == "cnn"
    labels = {p.label: p.role for p in graph.inputs}
    assert labels["params/Conv_0/kernel"] == "parameter" and labels["batch_stats/BatchNorm_0/mean"] == "state"
    assert any(label.startswith("rngs/") for label in labels)
    assert {g.label for g in graph.groups if g.kind == "module"} >= {"Conv_0", "BatchNorm_0", "Dense_0"}
    assert "50,250 parameters" in result.stdout and "f32[4,10]" in result.stdout
    html = (out / "cnn.html").read_text()
    assert html.startswith("<!DOCTYPE html>") or html.lower().startswith("<!doctype html>")


def test_export_re_renders_a_saved_graph(cnn_graph: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = cnn_graph
    for fmt in ("json", "dot", "html"):
        result = run(["export", str(out / "cnn.json"), "--format", fmt, "-o", str(out / f"again.{fmt}")], cwd=ROOT)
        assert result.returncode == 0, result.stderr
    assert io.read(out / "again.json") == io.read(out / "cnn.json")
    assert (out / "again.dot").read_text().startswith("digraph")
    broken = run(["export", str(out / "cnn.html")], cwd=ROOT)
    assert broken.returncode == 2 and "cannot read" in broken.stderr


def test_trace_errors_name_the_cause_and_the_line(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "bad.py": "import jax.numpy as jnp\n\ndef f(x):\n    if x.sum() > 0:\n        return x\n    return -x\n",
            "boom.py": "import jax\n\nraise RuntimeError('no data here')\n\ndef g(x):\n    return x\n",
            "free.py": "import jax\n\ndef h(x: jax.Array):\n    return jax.numpy.sin(x)\n",
            "jaxlsp.toml": (
                "version = 1\n[profiles.f]\ntarget = 'bad.py::f'\ninputs.args = [{ kind = 'array', shape = [3] }]\n"
                "[profiles.g]\ntarget = 'boom.py::g'\ninputs.args = [{ kind = 'array', shape = [3] }]\n"
            ),
        },
    )
    trace = run(["trace", "bad.py::f"], cwd=tmp_path)
    assert trace.returncode == 1 and "bad.py:4:" in trace.stderr and "TracerBoolConversionError" in trace.stderr
    assert not trace.stdout
    imported = run(["trace", "boom.py::g"], cwd=tmp_path)
    assert imported.returncode == 1 and "boom.py:3" in imported.stderr and "no data here" in imported.stderr
    needs = run(["trace", "free.py::h"], cwd=tmp_path)
    assert needs.returncode == 3 and "needs input" in needs.stderr and "[profiles.h]" in needs.stderr
    missing = run(["trace", "nope.py::x"], cwd=tmp_path)
    assert missing.returncode == 2 and "nope.py" in missing.stderr
    (tmp_path / "jaxlsp.toml").write_text(
        "version = 1\n[profiles.f]\ntarget = 'bad.py::f'\ninputs.args = [{ kind = 'array', shape = [3, -3] }]\n"
    )
    recipe = run(["trace", "bad.py::f"], cwd=tmp_path)
    assert recipe.returncode == 2
    assert "jaxlsp.toml:4: profiles.f.inputs.args[0].shape[1]: expected a positive integer" in recipe.stderr
