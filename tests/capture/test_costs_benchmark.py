"""benchmarks/costs.py runs end to end in its quick mode (no timing is asserted)."""

from __future__ import annotations

import re

import pytest

from tests.capture.conftest import quick_benchmark

pytest.importorskip("jax")


def test_quick_run_prints_the_costs_and_diff_ratios() -> None:
    lines = quick_benchmark("costs", 600)
    assert lines[0].startswith("costs and diff speed")
    assert re.search(r"transformer grad +\d+ eqns \| cold trace \d+\.\d\d \| first costs \d+\.\d\d \(", lines[1])
    assert re.search(r"; \d+ equations lowered\)$", lines[1]), lines[1]
    assert re.search(r"diff of [\d,]+ and [\d,]+ nodes .* \(\d+\.\d\dx, target <= 0\.5\): [+-]\d+ ops", lines[3]), (
        lines[3]
    )
    assert lines[-1] in ("costs ratios within target", "costs ratios MISSED a target")
