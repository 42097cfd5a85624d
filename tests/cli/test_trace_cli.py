"""``jaxlsp trace`` and ``jaxlsp export`` through the console script, on real JAX (CPU)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

from jaxlsp.graph import io
from jaxlsp.graph.validate import SCHEMA_PATH, check, load_compact_schema, load_schema
from tests.cli.helpers import expanded, run
from tests.discovery.helpers import write_tree

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "benchmarks" / "models"  # the 12-layer Linen transformer (profile forward: 1,132 equations)
BYTES_PER_EQUATION = 250  # issue 29's bar for the graph file


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
    data = expanded(out / "cnn.json")
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


@pytest.fixture(scope="module")
def transformer_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The transformer traced four times: by default, with --expanded, with --compact (the old
    opt-in), with --no-replay; each command's output beside its file."""
    out = tmp_path_factory.mktemp("transformer")
    variants = (("default", []), ("expanded", ["--expanded"]), ("compact", ["--compact"]), ("exact", ["--no-replay"]))
    for name, flags in variants:
        target = ["trace", "transformer.py::Transformer", "--profile", "forward", *flags]
        result = run([*target, "-o", str(out / f"{name}.json")], cwd=MODELS)
        assert result.returncode == 0, result.stderr
        (out / f"{name}.out").write_text(result.stdout, encoding="utf-8")
    return out


def test_repeated_layers_replay_and_the_file_is_the_one_every_call_traced_gives(transformer_files: Path) -> None:
    """The 12 layers: 11 calls replay the first one's equations (worker/reuse/replay.py); --no-replay
    traces all 12, and the graph file is the same, byte for byte."""
    assert "11 repeated module calls replayed" in (transformer_files / "default.out").read_text(encoding="utf-8")
    assert "replayed" not in (transformer_files / "exact.out").read_text(encoding="utf-8")
    assert (transformer_files / "exact.json").read_bytes() == (transformer_files / "default.json").read_bytes()


def test_the_graph_file_is_the_compact_form_by_default(transformer_files: Path) -> None:
    path = transformer_files / "default.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["format"], data["version"]) == ("jaxlsp.graph", 2)
    registry = Registry().with_resource(load_schema()["$id"], Resource.from_contents(load_schema()))
    validator = jsonschema.Draft202012Validator(load_compact_schema(), registry=registry)
    assert [e.message for e in validator.iter_errors(data)] == []
    equations = data["nodes"]["count"]
    assert equations > 1_000, equations
    per_equation = path.stat().st_size / equations
    assert per_equation <= BYTES_PER_EQUATION, f"{per_equation:.0f} bytes an equation"
    # --compact, the opt-in of earlier versions, is still accepted and writes the same file
    assert (transformer_files / "compact.json").read_bytes() == path.read_bytes()


def test_expanded_writes_version_1_which_the_default_file_exports_to(transformer_files: Path) -> None:
    full = transformer_files / "expanded.json"
    data = json.loads(full.read_text(encoding="utf-8"))
    assert data["version"] == 1
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    assert full.stat().st_size / len(data["nodes"]) > 4 * BYTES_PER_EQUATION  # what the default saves
    again = transformer_files / "again.json"
    exported = run(["export", str(transformer_files / "default.json"), "--format", "json", "-o", str(again)], cwd=ROOT)
    assert exported.returncode == 0, exported.stderr
    assert again.read_bytes() == full.read_bytes()  # the same graph: the same version 1 text
    assert io.read(transformer_files / "default.json") == io.read(full)
    both = run(["trace", "transformer.py::Transformer", "--expanded", "--compact", "-o", "x.json"], cwd=MODELS)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr, both.stderr
    assert not (MODELS / "x.json").exists()


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
