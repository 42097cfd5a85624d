"""benchmarks/capture.py runs end to end in its quick mode (no timing is asserted)."""

from __future__ import annotations

import re

import pytest

from tests.capture.conftest import quick_benchmark

pytest.importorskip("jax")


def test_quick_run_alternates_bare_and_warm_and_prints_the_ratios() -> None:
    lines = quick_benchmark("capture")
    assert lines[0].startswith("capture speed")
    assert re.search(r"transformer +1078 eqns \| bare +\d+\.\d\d .* warm +\d+\.\d\d \(\d+\.\d\dx", lines[1]), lines[1]
    assert re.fullmatch(r" +runs: bare \[\d+\.\d\d \d+\.\d\d\] warm \[\d+\.\d\d \d+\.\d\d\]", lines[2]), lines[2]
    assert lines[-1] in ("capture ratios within target", "capture ratios MISSED a target")
