"""``jaxlsp trace --time`` through the console script (issue 28): a 4-layer MLP whose second layer is
much the widest is ranked first, and the module rows add up to the measured step."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "timing"
UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}


def seconds(number: str, unit: str) -> float:
    return float(number) * UNITS[unit]


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("timing") / "ws"
    shutil.copytree(WORKSPACE, root)
    result = run(["trace", "timed_models.py::MLP", "--time", "--repeat", "3", "-o", "t.json"], cwd=root)
    return root, result


def test_the_widest_layer_ranks_first_and_the_rows_add_up_to_the_step(
    timed: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, result = timed
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("time: step "))
    step = re.match(r"time: step ([\d.]+) (s|ms|µs) \(wall clock, mean of 3 runs after a warm-up", lines[head])
    assert step is not None, lines[head]
    assert lines[head + 1].split() == ["module", "time", "share"]
    rows: dict[str, float] = {}
    for line in lines[head + 2 :]:
        cells = re.match(r"(.+?)\s+([\d.]+) (s|ms|µs)\s+(\d+ %|-)$", line)
        assert cells is not None, line
        if cells.group(1) == "total":
            total = seconds(cells.group(2), cells.group(3))
            break
        rows[cells.group(1)] = seconds(cells.group(2), cells.group(3))
    assert next(iter(rows)) == "MLP/Dense_1", rows  # 256 -> 8192: 8x the FLOPs of any other layer
    assert {"MLP/Dense_0", "MLP/Dense_2", "MLP/Dense_3"} <= set(rows)
    measured = seconds(step.group(1), step.group(2))
    assert sum(rows.values()) == pytest.approx(total, rel=0.02)  # the printed figures are rounded
    assert abs(sum(rows.values()) - measured) <= 0.10 * measured, (rows, measured)
    graph = expanded(root / "t.json")
    time = graph["time"]
    # Without the idle row the rows are the device's busy time, which the modules cover.
    busy = sum(v for k, v in rows.items() if not k.startswith("(idle"))
    assert busy == pytest.approx(time["busy"], rel=0.05, abs=2e-5)
    layers = sum(v for k, v in rows.items() if k.startswith("MLP"))
    assert layers >= 0.9 * time["busy"]
    assert time["repeat"] == 3 and len(time["steps"]) == 3 and time["platform"] == "cpu"
    assert time["attributed"] >= 0.9 * time["busy"]
    assert time["modules"][0]["module"] == "MLP"  # every level: the model holds all of it
    assert all("costs" in n for n in graph["nodes"])  # the FLOPs that split a fusion's time


def test_repeat_needs_time(tmp_path: Path) -> None:
    result = run(["trace", "timed_models.py::MLP", "--repeat", "3"], cwd=tmp_path)
    assert result.returncode == 2 and "--repeat goes with --time" in result.stderr


def test_a_plain_function_reads_by_line(tmp_path: Path) -> None:
    # Issue 47: a function has no modules (one row, "(outside modules)"); the lines table says
    # which line took the time, and XLA's bf16 converts no longer leave a fifth unattributed.
    root = tmp_path / "ws"
    shutil.copytree(WORKSPACE, root)
    result = run(["trace", "timed_models.py::bf16_mlp", "--time", "--repeat", "3", "-o", "t.json"], cwd=root)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split() == ["line", "time", "share"])
    rows: dict[str, float] = {}
    for line in lines[head + 1 :]:
        cells = re.match(r"(timed_models\.py:\d+)\s+([\d.]+) (s|ms|µs)\s+(\d+) %$", line)
        if cells is None:
            break
        rows[cells.group(1)] = seconds(cells.group(2), cells.group(3))
    source = (root / "timed_models.py").read_text().splitlines()
    dots = {f"timed_models.py:{k + 1}" for k, text in enumerate(source) if re.search(r"@ w[123]\b", text)}
    assert set(rows) == dots, (rows, dots)
    assert list(rows.values()) == sorted(rows.values(), reverse=True)
    time = expanded(root / "t.json")["time"]
    assert time["attributed"] >= 0.95 * time["busy"]
    assert "not attributed:" not in result.stdout
