"""Issue 14 through the console script: several CPU devices, portable graph files, keys and
recipes as a new user meets them (real JAX, real workers)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.validate import check
from tests.cli.helpers import expanded
from tests.cli.test_trace_cli import run
from tests.discovery.helpers import write_tree

PARALLEL = """\
import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P


def data_parallel(x):
    return jax.pmap(lambda v: jax.lax.psum(v * 2.0, "i"), axis_name="i")(x)


def sharded(x):
    mesh = Mesh(np.array(jax.devices()), ("x",))
    body = lambda v: jax.lax.psum(v, "x") * jax.lax.all_gather(v, "x", tiled=True)[: v.shape[0]]
    return jax.shard_map(body, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None))(x)
"""

RECIPE = """\
version = 1

[profiles.pmap2]
target = "parallel.py::data_parallel"
devices = 2
inputs.args = [{ kind = "array", shape = [2, 3] }]

[profiles.pmap4]
target = "parallel.py::data_parallel"
inputs.args = [{ kind = "array", shape = [4, 3] }]

[profiles.mesh]
target = "parallel.py::sharded"
devices = 4
inputs.args = [{ kind = "array", shape = [8, 3] }]

[profiles.step]
target = "keys.py::step"
inputs.args = [{ kind = "key", seed = 0 }, { kind = "array", shape = [3] }]

[profiles.broken]
target = "keys.py::other"
requires_grad = true
"""

KEYS = """\
import jax


def step(key, x):
    key, sub = jax.random.split(key)
    return key, x + jax.random.normal(sub, x.shape)


def other(x):
    return x
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("everyday") / "project"
    write_tree(root, {"models/parallel.py": PARALLEL, "models/keys.py": KEYS, "models/jaxlsp.toml": RECIPE})
    return root


def _graph(path: Path) -> dict[str, Any]:
    data = expanded(path)
    assert check(io.from_json(data)) == []
    return data


def test_pmap_with_two_devices_from_the_profile(project: Path, tmp_path: Path) -> None:
    result = run(
        ["trace", "models/parallel.py::data_parallel", "--profile", "pmap2", "-o", str(tmp_path / "g.json")], project
    )
    assert result.returncode == 0, result.stderr
    graph = _graph(tmp_path / "g.json")
    assert graph["coverage"]["complete"] is True and graph["coverage"]["opaque"] == []
    assert graph["coverage"]["effects"] == ["named_axis(i)"]
    labels = [(g["kind"], g["label"]) for g in graph["groups"]]
    assert labels == [("pmap", "pmap(i: 2)"), ("shard_map", "shard_map(i: 2)")]
    shard_map = next(n for n in graph["nodes"] if n["primitive"] == "shard_map")
    assert (shard_map["params"]["mesh"]["axis_names"], shard_map["params"]["mesh"]["axis_sizes"]) == (["i"], [2])
    assert shard_map["params"]["in_specs"] == ["P('i',)"]
    body = [v for v in graph["values"] if v.get("perDevice")]
    assert body and {tuple(v["shape"]) for v in body} >= {(1, 3), (3,)}
    assert [v["globalShape"] for v in body if "globalShape" in v] == [[2, 3], [2, 3]]


def test_devices_on_the_command_line_and_the_clear_error_without(project: Path, tmp_path: Path) -> None:
    without = run(["trace", "models/parallel.py::data_parallel", "--profile", "pmap4"], project)
    assert without.returncode == 1
    assert "set devices = 4 in the profile (or jaxlsp trace --devices 4)" in without.stderr, without.stderr
    given = run(
        [
            "trace",
            "models/parallel.py::data_parallel",
            "--profile",
            "pmap4",
            "--devices",
            "4",
            "-o",
            str(tmp_path / "g.json"),
        ],
        project,
    )
    assert given.returncode == 0, given.stderr
    assert "pmap(i: 4)" in {g["label"] for g in _graph(tmp_path / "g.json")["groups"]}
    gpu = run(
        ["trace", "models/parallel.py::data_parallel", "--profile", "pmap4", "--devices", "4", "--device", "cuda:0"],
        project,
    )
    assert gpu.returncode == 2 and "virtual CPU devices" in gpu.stderr


def test_a_mesh_of_four_devices(project: Path, tmp_path: Path) -> None:
    result = run(["trace", "models/parallel.py::sharded", "-o", str(tmp_path / "g.json")], project)
    assert result.returncode == 0, result.stderr
    graph = _graph(tmp_path / "g.json")
    assert graph["coverage"]["complete"] is True
    (group,) = graph["groups"]
    assert (group["kind"], group["label"]) == ("shard_map", "shard_map(x: 4)")
    primitives = {n["primitive"] for n in graph["nodes"]}
    assert "shard_map" in primitives and "all_gather" in primitives
    inside = [v for v in graph["values"] if v.get("perDevice")]
    # one device's shard beside the whole array: the body's input and its result
    assert [(v["shape"], v["globalShape"]) for v in inside if "globalShape" in v] == [([2, 3], [8, 3])] * 2


def test_graph_files_are_portable(project: Path, tmp_path: Path) -> None:
    """No absolute path anywhere: paths relative to the recipe's folder, library frames to their
    sys.path entry; the moved project's export still works."""
    out = tmp_path / "step.json"
    result = run(["trace", "models/keys.py::step", "-o", str(out)], project)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert str(project) not in text and not re.search(r'"/(?:[^"]*)"', text), text[:2000]
    graph = _graph(out)
    assert graph["target"]["path"] == "keys.py" and set(graph["sources"]) == {"jaxlsp.toml", "keys.py"}
    assert [(p["role"], _dtype(graph, p["value"])) for p in graph["outputs"]] == [
        ("output", "key<fry>"),
        ("output", "float32"),
    ]
    frames = [f for n in graph["nodes"] for f in n["frames"]]
    assert frames and all(f["path"] == "keys.py" and "package" not in f for f in frames)
    moved = tmp_path / "elsewhere"
    shutil.copytree(project, moved)
    exported = run(["export", str(out), "--format", "dot", "-o", str(tmp_path / "step.dot")], moved)
    assert exported.returncode == 0, exported.stderr


def test_one_broken_profile_does_not_refuse_the_others(project: Path) -> None:
    good = run(["trace", "models/keys.py::step"], project)
    assert good.returncode == 0, good.stderr
    broken = run(["trace", "models/keys.py::other"], project)
    assert broken.returncode == 2
    assert "profiles.broken.requires_grad: unknown key (did you mean transform?" in broken.stderr


def _dtype(graph: dict[str, Any], vid: str) -> str:
    return str(next(v["dtype"] for v in graph["values"] if v["id"] == vid))
