"""``jaxlsp trace --costs / --precision`` and ``jaxlsp diff`` through the console script (issue 18)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "costs"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("costs") / "ws"
    shutil.copytree(WORKSPACE, root)
    result = run(["trace", "cost_models.py::MLP", "--costs", "--precision", "-o", "a.json"], cwd=root)
    return root, result


def test_trace_costs_prints_the_module_table(traced: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    root, result = traced
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("module "))
    assert lines[head].split() == ["module", "params", "FLOPs", "bytes", "share", "fwd", "FLOPs", "bwd", "FLOPs"]
    rows = {}
    for line in lines[head + 1 :]:
        if line.startswith("total:"):
            break
        cells = line.rsplit(None, 6)
        rows[cells[0].strip()] = cells[1:]
    assert next(iter(rows)) == "MLP"  # sorted by FLOPs, the whole model first
    params, flops, _, share, forward, backward = rows["MLP/Dense_0"]
    assert params == str(3 * 8 + 8) and int(flops) == int(forward) + int(backward)
    assert int(forward) == 2 * 2 * 3 * 8 + 2 * 8  # the product and the bias add
    assert share.endswith("%") and rows["MLP"][3] != "-"
    total = next(line for line in lines if line.startswith("total: "))
    assert int(total.split()[1]) == int(rows["MLP"][1]) + int(rows["(outside modules)"][1])
    assert any(line.startswith("memory: peak ") for line in lines)
    assert any(line.startswith("residuals for the backward pass: ") for line in lines)
    assert any(line.startswith("precision: ") for line in lines)
    assert any("MLP/Dense_0: f32 x f32 -> f32, precision DEFAULT" in line for line in lines)
    graph = expanded(root / "a.json")
    assert graph["costs"]["platform"] == "cpu" and all("costs" in n for n in graph["nodes"])


def test_diff_exit_codes_and_summary(traced: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    root, first = traced
    assert first.returncode == 0, first.stderr
    model = root / "cost_models.py"
    model.write_text(model.read_text().replace("hidden: int = 8", "hidden: int = 16"))
    second = run(["trace", "cost_models.py::MLP", "-o", "b.json"], cwd=root)
    assert second.returncode == 0, second.stderr
    different = run(["diff", "a.json", "b.json"], cwd=root)
    assert different.returncode == 1, different.stderr
    summary = different.stdout.splitlines()[0]
    as_json = run(["diff", "a.json", "b.json", "--json"], cwd=root)
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and data["summary"] == summary and data["counts"]["added"] == 0
    assert summary == f"{data['counts']['changed']} changed; MLP/Dense_0 dot_general f32[2,8] \u2192 f32[2,16]"
    same = run(["diff", "a.json", "a.json"], cwd=root)
    assert (same.returncode, same.stdout.strip()) == (0, "no changes")
    (root / "broken.json").write_text("{")
    for missing in (["diff", "a.json", "nothere.json"], ["diff", "broken.json", "a.json"]):
        unreadable = run(missing, cwd=root)
        assert unreadable.returncode == 2 and "cannot read" in unreadable.stderr
