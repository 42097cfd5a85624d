"""Sharded inputs from a recipe (issue 28): ``mesh`` and per-array ``sharding`` in jaxlsp.toml
shard an MLP that knows nothing of meshes (``tests/workspaces/mesh_recipe``) over a data-by-model
mesh of 4 virtual CPU devices, through the console script, on real JAX: abstract inputs for a
trace, device_put arrays for a values run, and too few devices refused at the mesh's key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jaxlsp.graph import io
from jaxlsp.graph.validate import SCHEMA_PATH, check
from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "mesh_recipe"
MESH = {"axisNames": ["data", "model"], "axisSizes": [2, 2], "axisTypes": ["Explicit", "Explicit"]}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mesh") / "mesh_recipe"
    shutil.copytree(WORKSPACE, root)
    return root


def _values(data: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The values by port label and by the primitive that made them."""
    values = {v["id"]: v for v in data["values"]}
    ports = {p["label"]: values[p["value"]] for p in data["inputs"] + data["outputs"]}
    made = {n["primitive"]: values[n["outputs"][0]] for n in data["nodes"]}
    return ports, made


def test_a_recipe_mesh_shards_the_inputs_and_every_value(project: Path) -> None:
    result = run(["trace", "mlp.py::mlp", "-o", "mlp.json"], project)
    assert result.returncode == 0, result.stderr
    data = expanded(project / "mlp.json")
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    assert check(io.from_json(data)) == []
    assert data["mesh"] == MESH and data["profile"]["devices"] == 4  # the mesh's size, by default
    ports, made = _values(data)
    assert ports["args/1"]["sharding"] == {"spec": [["data"], None]}
    assert ports["args/0/w1"]["sharding"] == {"spec": [None, ["model"]]}
    assert "sharding" not in ports["args/0/w2"]  # not split: nothing to say
    assert made["tanh"]["sharding"] == {"spec": [["data"], ["model"]]}
    assert ports["out"]["sharding"] == {"spec": [["data"], None]}
    assert "mesh: data: 2, model: 2 (Explicit)" in result.stdout
    assert "f32[8@data,16]" in result.stdout and "f32[16,64@model]" in result.stdout, result.stdout
    assert "f32[8@data,4]" in result.stdout
    dot = run(["export", "mlp.json", "--format", "dot", "-o", "mlp.dot"], project)
    assert dot.returncode == 0 and 'label="f32[8@data,64@model]"' in (project / "mlp.dot").read_text()


def test_a_values_run_puts_the_arrays_on_the_mesh(project: Path) -> None:
    result = run(["trace", "mlp.py::mlp", "--values", "-o", "values.json"], project)
    assert result.returncode == 0, result.stderr
    data = expanded(project / "values.json")
    ports, made = _values(data)
    assert ports["args/1"]["sharding"] == {"spec": [["data"], None]} and "stats" in ports["args/1"]
    assert made["tanh"]["sharding"] == {"spec": [["data"], ["model"]]} and "stats" in made["tanh"]
    assert "no NaN or Inf in any value" in result.stdout


def test_fewer_devices_than_the_mesh_is_refused_at_its_key(project: Path) -> None:
    result = run(["trace", "mlp.py::mlp", "--devices", "2"], project)
    assert result.returncode != 0 and not result.stdout
    assert "profiles.sharded.mesh: a mesh of 4 devices (data: 2, model: 2) needs at least 4 devices" in result.stderr
    assert "--devices is 2" in result.stderr, result.stderr
    (project / "bad.toml").write_text(
        (project / "jaxlsp.toml").read_text().replace('sharding = [[], "model"]', 'sharding = [[], "modle"]')
    )
    bad = run(["trace", "mlp.py::mlp", "--recipe", "bad.toml"], project)
    assert bad.returncode != 0 and not bad.stdout
    assert 'profiles.sharded.inputs.args[0].w1.sharding[1]: "modle" is not an axis of the mesh (axes: data, model)' in (
        bad.stderr
    ), bad.stderr
