"""``jaxlsp trace --values`` through the console script, on real JAX (CPU): the summary line of the
first non-finite value, a graph file with statistics, ``--save-values`` by label and by node,
the gradient table, and a run that would pass the worker's memory cap."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from jaxlsp.capture.engine import TraceFailure, TraceRequest, ValuesOptions
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.service import trace_once
from jaxlsp.graph import io
from jaxlsp.graph.validate import SCHEMA_PATH, check
from tests.cli.helpers import expanded
from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "tests" / "workspaces" / "values"


def run(args: list[str], cwd: Path = VALUES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxlsp", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )


def test_values_print_the_first_nan_line_and_save_arrays_by_label_and_by_node(tmp_path: Path) -> None:
    line = next(
        i for i, text in enumerate((VALUES / "values_targets.py").read_text().splitlines(), 1) if "sqrt(c)" in text
    )
    graph_file, ports = tmp_path / "blowup.json", tmp_path / "ports.npz"
    traced = run(["trace", "values_targets.py::blowup", "--values", "--save-values", str(ports), "-o", str(graph_file)])
    assert traced.returncode == 0, traced.stderr  # a NaN is a finding, not a failure
    summary = f"first non-finite (nan): sqrt at values_targets.py:{line}, scan iteration 7, input min -1.0"
    assert [text for text in traced.stdout.splitlines() if text.startswith("first non-finite")] == [summary]
    assert "replay: verified against a direct call" in traced.stdout
    assert f"wrote values: {ports} (2 arrays)" in traced.stdout

    # The graph file holds the statistics (never arrays), valid against the schema, and loads back.
    data = expanded(graph_file)
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    graph = io.from_json(data)
    assert (
        check(graph) == [] and graph.execution is not None and graph.execution["firstNonFinite"]["message"] == summary
    )
    assert all("data" not in json.dumps(v.get("stats", {})) for v in data["values"])

    # By label: the graph's inputs and outputs.
    saved = np.load(ports)
    assert sorted(saved.files) == ["input:args/0", "output:out"]
    np.testing.assert_array_equal(saved["input:args/0"], np.full(4, 6.0, np.float32))
    with np.errstate(invalid="ignore"):
        expected = np.sqrt(np.repeat(np.arange(5.0, -4.0, -1.0), 4).reshape(9, 4)).astype(np.float32)
    np.testing.assert_array_equal(saved["output:out"], expected)  # NaN in rows 7 to 9, equal as arrays go

    # By node: the sqrt's output, as its last iteration left it.
    node = next(n for n in graph.nodes if n.primitive == "sqrt")
    nodes = tmp_path / "node.npz"
    picked = run(["trace", "values_targets.py::blowup", "--values", "--save-values", str(nodes), "--nodes", node.id])
    assert picked.returncode == 0, picked.stderr
    saved = np.load(nodes)
    assert saved.files == [f"{node.id}:sqrt:0"] and np.isnan(saved[f"{node.id}:sqrt:0"]).all()
    unknown = run(["trace", "values_targets.py::blowup", "--save-values", str(nodes), "--nodes", "n9999"])
    assert unknown.returncode == 3 and "--nodes: no node, value or port label 'n9999'" in unknown.stderr
    bad = run(["trace", "values_targets.py::blowup", "--values", "--dim", "n"])
    assert bad.returncode == 2 and "--dim expects NAME=SIZE" in bad.stderr


def test_state_inputs_and_their_updated_outputs_are_saved_apart_and_bf16_loads_as_float32(tmp_path: Path) -> None:
    # a counter's ``calls`` and BatchNorm's statistics are inputs and, updated, outputs with the
    # same labels: keyed by label alone, the .npz kept one array under both (7 arrays for 10 ports)
    ports = tmp_path / "counted.npz"
    traced = run(
        ["trace", "values_targets.py::Counted", "--profile", "counted", "--values", "--save-values", str(ports)]
    )
    assert traced.returncode == 0, traced.stderr
    assert f"wrote values: {ports} (10 arrays)" in traced.stdout
    saved = np.load(ports)
    state = ["batch_stats/BatchNorm_0/mean", "batch_stats/BatchNorm_0/var", "counter/calls"]
    params = ["params/BatchNorm_0/bias", "params/BatchNorm_0/scale"]
    assert sorted(saved.files) == sorted(
        [*(f"input:{label}" for label in [*params, *state, "args/0"]), "output:out", *(f"output:{s}" for s in state)]
    )
    assert int(saved["input:counter/calls"]) + 1 == int(saved["output:counter/calls"])
    batch = saved["input:args/0"].mean(0)  # BatchNorm's momentum 0.99, from a zero mean
    np.testing.assert_allclose(saved["output:batch_stats/BatchNorm_0/mean"], 0.01 * batch, rtol=1e-5)
    np.testing.assert_array_equal(saved["input:batch_stats/BatchNorm_0/mean"], np.zeros(3, np.float32))

    # bfloat16 has no NumPy dtype: np.savez wrote opaque |V2 bytes; it is stored as float32 (exact)
    halved = tmp_path / "halved.npz"
    traced = run(
        ["trace", "values_targets.py::halved", "--profile", "halved", "--values", "--save-values", str(halved)]
    )
    assert traced.returncode == 0, traced.stderr
    assert "(bfloat16 stored as float32: output:out)" in traced.stdout
    out = np.load(halved)["output:out"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out * 2, np.array([1.0, 2.0, 3.0], np.float32))


def test_a_gradient_profile_prints_norms_per_module_and_zero_gradients() -> None:
    traced = run(["trace", "values_targets.py::LinenMLP", "--profile", "grad", "--values"])
    assert traced.returncode == 0, traced.stderr
    lines = traced.stdout.splitlines()
    table = lines.index("gradient norms by module:")
    rows = [text.split() for text in lines[table + 1 : table + 4]]
    assert [r[0] for r in rows] == ["(all)", "Dense_0", "Dense_1"]
    assert all(float(r[1]) > 0 for r in rows) and [r[2] for r in rows] == ["(4", "(2", "(2"]
    total = math.sqrt(float(rows[1][1]) ** 2 + float(rows[2][1]) ** 2)
    assert float(rows[0][1]) == pytest.approx(total, rel=1e-4)
    assert "all-zero gradients: none" in lines


def test_a_run_that_would_pass_the_memory_cap_stops_with_an_error_naming_the_node() -> None:
    req = TraceRequest(
        file=VALUES / "values_targets.py",
        name="huge",
        workspace_root=VALUES,
        profile="huge",
        values=ValuesOptions(),
    )
    with pytest.raises(TraceFailure) as info:
        trace_once(req, CaptureOptions(memory_mb=3584))  # 3.5 GiB of address space; the zeros need 4 GiB
    failure = info.value
    assert failure.kind == "memory", failure.paragraph()
    assert (
        "the values run stopped at node n" in failure.message
        and "would pass the worker's memory cap" in failure.message
    )
    assert failure.frame is not None and failure.frame["path"].endswith("values_targets.py")
