"""Shardings in the graph through the console script (issue 28): an explicitly sharded MLP on 4
virtual CPU devices (``tests/workspaces/sharding``), programs whose shardings disagree, and the
same MLP on one device, on real JAX."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jaxlsp.graph import io
from jaxlsp.graph.validate import SCHEMA_PATH, check
from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "sharding"
MESH = {"axisNames": ["x"], "axisSizes": [4], "axisTypes": ["Explicit"]}


def _line(path: Path, text: str) -> int:
    """The 1-based line of ``path`` holding ``text``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shardings") / "sharding"
    shutil.copytree(WORKSPACE, root)
    return root


@pytest.fixture(scope="module")
def mlp(project: Path) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    result = run(["trace", "model.py::mlp", "-o", "mlp.json"], project)
    assert result.returncode == 0, result.stderr
    data = expanded(project / "mlp.json")
    return data, result


def test_the_sharded_mlp_keeps_every_values_sharding_and_the_mesh(
    mlp: tuple[dict[str, Any], subprocess.CompletedProcess[str]], project: Path
) -> None:
    data, result = mlp
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    graph = io.from_json(data)
    assert check(graph) == [] and io.from_json(io.to_json(graph)) == graph
    assert data["mesh"] == MESH
    values = {v["id"]: v for v in data["values"]}
    ports = {p["label"]: values[p["value"]] for p in data["inputs"] + data["outputs"]}
    assert ports["args/1"]["sharding"] == {"spec": [["x"], None]}  # the batch, split over x
    assert "sharding" not in ports["args/0/w1"]  # replicated weights: nothing to say
    assert ports["out"]["sharding"] == {"spec": [["x"], None]}
    by_primitive = {n["primitive"]: n for n in data["nodes"]}
    tanh = values[by_primitive["tanh"]["outputs"][0]]
    assert (tanh["shape"], tanh["sharding"]) == ([8, 64], {"spec": [["x"], None]})
    # the summary prints types as jax does, and the mesh
    assert "mesh: x: 4 (Explicit)" in result.stdout
    assert "f32[8@x,16]" in result.stdout and "f32[8@x,4]" in result.stdout and "f32[16,64]" in result.stdout
    # the same MLP on one device: its graph is as before, with no mesh and no sharding anywhere
    single = run(["trace", "single.py::mlp", "-o", "single.json"], project)
    assert single.returncode == 0, single.stderr
    plain = expanded(project / "single.json")
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(plain)
    assert "mesh" not in plain and not any("sharding" in v for v in plain["values"])
    assert (
        "mesh:" not in single.stdout
        and "f32[8,16]" in single.stdout
        and "@" not in single.stdout.split("top scopes")[0]
    )


def test_reshard_and_shard_map_show_their_shardings(
    mlp: tuple[dict[str, Any], subprocess.CompletedProcess[str]], project: Path
) -> None:
    data, _ = mlp
    nodes = {n["primitive"]: n for n in data["nodes"]}
    reshard = nodes["reshard"]["params"]["dst_sharding"]
    assert reshard["spec"] == "P('x', None)" and reshard["mesh"]["axis_names"] == ["x"]
    assert "repr" not in reshard  # readable, not a repr cut in the middle of its mesh
    shard_map = nodes["shard_map"]
    assert shard_map["params"]["in_specs"] == ["P('x', None)"] and shard_map["params"]["out_specs"] == ["P('x', None)"]
    body = [v for v in data["values"] if v.get("perDevice")]
    assert body and any(v.get("sharding") == {"spec": [None, None], "varying": ["x"]} for v in body)
    dot = run(["export", "mlp.json", "--format", "dot", "-o", "mlp.dot"], project)
    assert dot.returncode == 0, dot.stderr
    text = (project / "mlp.dot").read_text()
    assert 'label="f32[8@x,64]"' in text and "f32[2,4]{V:x}" in text  # edges carry the sharded types
    assert "in P('x', None) → out P('x', None)" in text  # the shard_map cluster says its specs
    assert "reshard\\nP('x', None)" in text  # the reshard node says where to


def test_a_sharding_mismatch_is_an_error_at_the_users_line_naming_both(project: Path) -> None:
    source = project / "model.py"
    added = run(["trace", "model.py::mismatch"], project)
    assert added.returncode == 1 and not added.stdout
    where = f"model.py:{_line(source, 'return a + b')}:"
    assert where in added.stderr and "sharding mismatch" in added.stderr, added.stderr
    assert "f32[8@x,16]" in added.stderr and "f32[8,16@x]" in added.stderr
    assert "jax.sharding.reshard" in added.stderr
    joined = run(["trace", "model.py::joined"], project)
    assert joined.returncode == 1
    assert f"model.py:{_line(source, 'jnp.concatenate')}:" in joined.stderr and "sharding mismatch" in joined.stderr
    # both shardings as the user wrote them, not two NamedSharding reprs of the whole mesh
    assert "P('x', None), P(None, 'x')" in joined.stderr and "AbstractMesh" not in joined.stderr, joined.stderr


def test_an_auto_mesh_keeps_the_mesh_and_the_constraint_on_its_node(project: Path) -> None:
    """Under Auto axes the types carry no split: the graph has the mesh and no value sharding,
    and ``with_sharding_constraint`` says what it asks for (its node's params, the DOT label)."""
    result = run(["trace", "auto.py::step", "-o", "auto.json"], project)
    assert result.returncode == 0, result.stderr
    data = expanded(project / "auto.json")
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    assert data["mesh"] == {"axisNames": ["d"], "axisSizes": [4], "axisTypes": ["Auto"]}
    assert not any("sharding" in v for v in data["values"]) and "mesh: d: 4 (Auto)" in result.stdout
    (constraint,) = [n for n in data["nodes"] if n["primitive"] == "sharding_constraint"]
    assert constraint["params"]["sharding"]["spec"] == "P('d', None)"
    assert constraint["params"]["context_mesh"]["axis_types"] == ["Auto"]
    assert run(["export", "auto.json", "--format", "dot", "-o", "auto.dot"], project).returncode == 0
    assert "sharding_constraint\\nP('d', None)" in (project / "auto.dot").read_text()
