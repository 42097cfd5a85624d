"""benchmarks/compiled.py runs end to end in its quick mode (no timing is asserted)."""

from __future__ import annotations

import re

import pytest

from tests.capture.conftest import quick_benchmark

pytest.importorskip("jax")


def test_quick_run_prints_the_compiled_overhead_ratio() -> None:
    lines = quick_benchmark("compiled", 600)
    assert lines[0].startswith("compiled program overhead")
    assert re.search(
        r"transformer +\| bare compile \d+\.\d\d \| added by --compiled \d+\.\d\d \(\d+\.\d\dx, target <= 1\.2\) "
        r"\| \d+ fusions, 0 collectives$",
        lines[1],
    ), lines[1]
    assert lines[-1] in ("compiled ratios within target", "compiled ratios MISSED a target")
