"""``jaxlsp trace --compiled`` through the console script (issue 28): the collectives XLA inserts
for 4 virtual CPU devices, attributed to the line and module that caused them, the per-module
table, per-device memory, and ``collectives: none`` on one device."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from jaxlsp.graph import io
from jaxlsp.graph.validate import load_schema
from tests.cli.helpers import expanded, run

pytest.importorskip("jax")

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "compiled"
Traced = tuple[subprocess.CompletedProcess[str], dict[str, Any]]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("compiled") / "ws"
    shutil.copytree(WORKSPACE, folder)
    return folder


def _trace(root: Path, target: str, profile: str) -> Traced:
    out = f"{profile}.json"
    result = run(["trace", target, "--profile", profile, "--compiled", "-o", out], cwd=root)
    assert result.returncode == 0, result.stderr
    graph = expanded(root / out)
    assert [e.message for e in Draft202012Validator(load_schema()).iter_errors(graph)] == []
    return result, graph


def _line(root: Path, file: str, needle: str) -> int:
    lines = (root / file).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


def _collectives_line(result: subprocess.CompletedProcess[str]) -> str:
    return next(line for line in result.stdout.splitlines() if line.startswith("collectives:"))


def _node(graph: dict[str, Any], nid: str) -> dict[str, Any]:
    return next(n for n in graph["nodes"] if n["id"] == nid)


def test_a_matmul_over_a_sharded_contracting_axis_has_one_all_reduce_at_its_line(root: Path) -> None:
    result, graph = _trace(root, "sharded.py::matmul", "contracting")
    line = _line(root, "sharded.py", "c = a @ b")
    [collective] = graph["compiled"]["collectives"]
    assert collective["kind"] == "all-reduce" and collective["source"]["line"] == line
    assert collective["source"]["path"] == "sharded.py"
    assert _node(graph, collective["nodes"][0])["primitive"] == "dot_general"
    assert collective["replicaGroups"] == [[0, 1, 2, 3]] and collective["bytes"] == 8 * 16 * 4
    assert _collectives_line(result) == f"collectives: all-reduce \u00d71 (512 B) at sharded.py:{line}"
    # XLA's sharding of the inputs, and the per-device shape of the product (the full [8,16]
    # on every device, before the reduction sums the parts)
    compiled = graph["compiled"]
    assert [i["sharding"] for i in compiled["inputs"]] == ["P(None, 'x')", "P('x', None)"]
    assert compiled["devices"] == 4 and compiled["mesh"] == {"axes": {"x": 4}}
    lines = result.stdout.splitlines()
    head = next(i for i, text in enumerate(lines) if text.split()[:2] == ["module", "FLOPs"])
    assert lines[head].split() == ["module", "FLOPs", "bytes", "collective", "bytes"]
    assert lines[head + 1].split()[:2] == ["(whole", "program)"] and lines[head + 1].split()[-1] == "512"
    assert any(text.startswith("memory per device: ") and "(XLA: arguments " in text for text in lines)
    assert any(text.startswith("held at the compiled schedule's peak") for text in lines)
    assert not any("liveness walk" in text for text in lines)  # one figure: XLA's
    assert io.read(root / "contracting.json").compiled == compiled  # the section reads back


def test_shard_map_psum_shows_its_all_reduce_at_its_line(root: Path) -> None:
    result, graph = _trace(root, "sharded.py::summed", "psum")
    line = _line(root, "sharded.py", "jax.lax.psum(")
    [collective] = graph["compiled"]["collectives"]
    assert collective["kind"] == "all-reduce" and collective["source"]["line"] == line
    assert _node(graph, collective["nodes"][0])["primitive"].startswith("psum")
    assert _collectives_line(result).startswith(f"collectives: all-reduce \u00d71 (128 B) at sharded.py:{line}")


def test_fsdp_all_gathers_are_at_the_layers_that_need_their_kernels(root: Path) -> None:
    result, graph = _trace(root, "fsdp.py::MLP", "fsdp")
    gathers = [c for c in graph["compiled"]["collectives"] if c["kind"] == "all-gather"]
    by_scope = {c["scope"]: c for c in gathers}
    assert sorted(by_scope) == ["down", "up"] and len(gathers) == 2
    up, down = _line(root, "fsdp.py", "self.up(x)"), _line(root, "fsdp.py", "self.down(h)")
    assert by_scope["up"]["source"]["line"] == up and by_scope["down"]["source"]["line"] == down
    assert by_scope["up"]["shape"] == "f32[32,64]" and by_scope["down"]["shape"] == "f32[64,16]"
    for c in gathers:
        assert _node(graph, c["nodes"][0])["primitive"] == "dot_general"
    text = _collectives_line(result)
    assert f"all-gather \u00d71 (8.0 KiB) at fsdp.py:{up} up" in text
    assert f"all-gather \u00d71 (4.0 KiB) at fsdp.py:{down} down" in text
    # the table's collective bytes per module, and the peak's holders by module
    rows = {r["scope"]: r for r in graph["compiled"]["modules"]}
    assert rows["up"]["collectiveBytes"] == 32 * 64 * 4 and rows["down"]["collectiveBytes"] == 64 * 16 * 4
    assert rows[""]["collectiveBytes"] == rows["up"]["collectiveBytes"] + rows["down"]["collectiveBytes"]
    assert rows["up"]["flops"] > rows["down"]["flops"] > 0
    peak = graph["compiled"]["peak"]
    assert {m["scope"] for m in peak["byModule"]} >= {"up", "down"}
    assert peak["bytes"] == sum(m["bytes"] for m in peak["byModule"])
    gathered = [v for v in peak["values"] if v["instruction"].startswith("all-gather")]
    assert gathered and all("value" not in v for v in gathered)  # a gathered kernel is no node's result
    # the batch is split over the 4 devices: each holds 2 of its 8 rows
    x = next(p["value"] for p in graph["inputs"] if p["role"] == "input")
    h = next(n for n in graph["nodes"] if n["scope"] == "up" and n["primitive"] == "dot_general")["outputs"][0]
    assert graph["compiled"]["values"][h] == {"perDevice": [2, 64], "split": [4, 1]}
    assert {"value": x, "sharding": "P('x', None)"} in graph["compiled"]["inputs"]
    assert graph["compiled"]["values"][x] == {"perDevice": [2, 32], "split": [4, 1]}
    kernels = [p["value"] for p in graph["inputs"] if p["role"] == "parameter" and p["label"].endswith("kernel")]
    assert sorted(graph["compiled"]["values"][k]["split"] for k in kernels) == [[4, 1], [4, 1]]  # FSDP shards


def test_a_single_device_program_says_collectives_none(root: Path) -> None:
    result, graph = _trace(root, "single.py::single", "single")
    assert _collectives_line(result) == "collectives: none"
    assert graph["compiled"]["collectives"] == [] and graph["compiled"]["devices"] == 1
    assert graph["compiled"]["fusions"] and all(f["nodes"] for f in graph["compiled"]["fusions"])


def test_a_program_that_does_not_compile_keeps_its_graph_and_says_why(root: Path) -> None:
    result = run(["trace", "foreign.py::foreign", "--profile", "foreign", "--compiled", "-o", "foreign.json"], cwd=root)
    assert result.returncode == 1, result.stdout
    assert "compiling foreign.py::foreign failed: " in result.stderr
    assert "No FFI handler registered for jaxlsp_no_such_target" in result.stderr
    assert _collectives_line(result).startswith("collectives: unknown, the compile failed: ")
    graph = io.read(root / "foreign.json")  # the graph was made and written all the same
    assert [n.primitive for n in graph.nodes] == ["ffi_call", "mul"]
    assert graph.compiled is not None and "jaxlsp_no_such_target" in graph.compiled["error"]
