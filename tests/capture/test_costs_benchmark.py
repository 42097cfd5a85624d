"""benchmarks/costs.py runs end to end in its quick mode (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_prints_the_costs_and_diff_ratios() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "costs.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode in (0, 1), out.stderr[-2000:]  # one run proves nothing about speed
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("costs and diff speed")
    assert re.search(r"transformer grad +\d+ eqns \| cold trace \d+\.\d\d \| first costs \d+\.\d\d \(", lines[1])
    assert re.search(r"; \d+ equations lowered\)$", lines[1]), lines[1]
    assert re.search(r"diff of [\d,]+ and [\d,]+ nodes .* \(\d+\.\d\dx, target <= 0\.5\): [+-]\d+ ops", lines[3]), (
        lines[3]
    )
    assert lines[-1] in ("costs ratios within target", "costs ratios MISSED a target")
