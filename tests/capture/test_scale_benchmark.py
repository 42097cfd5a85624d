"""benchmarks/scale.py runs end to end on two small sizes (no timing is asserted)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deadlines import scaled

pytest.importorskip("flax")

ROOT = Path(__file__).resolve().parents[2]


def test_two_small_sizes_give_every_stage_its_figures_and_a_growth_fit(tmp_path: Path) -> None:
    rows_file = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--sizes", "300,600", "--shapes", "forward"]
    command += ["--repeats", "2"]
    out = subprocess.run(
        [*command, "--json", str(rows_file)],
        capture_output=True,
        text=True,
        timeout=scaled(600),
        cwd=ROOT,
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: a missed goal, which small sizes prove nothing about
    lines = out.stdout.strip().splitlines()
    assert lines[-1] in ("scale within target", "scale MISSED a target")
    rows = json.loads(rows_file.read_text())
    assert [(r["shape"], r["size"]) for r in rows] == [("forward", 300), ("forward", 600)]
    for row in rows:
        assert abs(row["eqns"] - row["size"]) < 110  # the depth comes nearest the size, a layer is ~100
        assert {"import", "init", "trace", "wall"} <= set(row["bare"])
        assert {"jax", "import", "init", "trace", "build", "serialize", "wall"} <= set(row["cli"])
        assert {"bytes", "parse", "write", "store"} <= set(row["file"])
        assert {"first", "page ms", "rss", "warm", "warm import", "warm trace", "warm build"} <= set(row["server"])
        assert [len(row["runs"][kind]) for kind in ("bare", "cli", "warm")] == [2, 2, 2]
        # the row's figures are those of the lower middle run
        assert row["bare"]["wall"] == min(row["runs"]["bare"]) and row["server"]["warm"] == min(row["runs"]["warm"])
    runs = [line for line in lines if "every run (the median kept):" in line]
    assert len(runs) == 2 and all(
        re.search(r"bare [\d.]+ [\d.]+; cli [\d.]+ [\d.]+; warm [\d.]+ [\d.]+$", r) for r in runs
    )
    table = next(i for i, line in enumerate(lines) if line.startswith("scale: seconds per stage"))
    assert re.match(r" +shape +size +depth +eqns +b\.imp", lines[table + 1]), lines[table + 1]
    growth = next(line for line in lines if line.startswith("  forward  b.imp"))
    # a slope (or "-" where a stage has no figure); between two small sizes on a busy machine a
    # stage can take less time at the larger one, so a slope may be negative
    assert re.search(r"build (-|-?\d+\.\d\d), ser (-|-?\d+\.\d\d)", growth), growth
