"""benchmarks/capture.py runs end to end in its quick mode (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_alternates_bare_and_warm_and_prints_the_ratios() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "capture.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode in (0, 1), out.stderr[-2000:]  # two runs prove nothing about speed
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("capture speed")
    assert re.search(r"transformer +1078 eqns \| bare +\d+\.\d\d .* warm +\d+\.\d\d \(\d+\.\d\dx", lines[1]), lines[1]
    assert re.fullmatch(r" +runs: bare \[\d+\.\d\d \d+\.\d\d\] warm \[\d+\.\d\d \d+\.\d\d\]", lines[2]), lines[2]
    assert lines[-1] in ("capture ratios within target", "capture ratios MISSED a target")
