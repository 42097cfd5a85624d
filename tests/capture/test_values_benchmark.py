"""benchmarks/values.py runs end to end in its quick mode (no timing is asserted)."""

from __future__ import annotations

import re

import pytest

from tests.capture.conftest import quick_benchmark

pytest.importorskip("jax")


def test_quick_run_compares_a_values_run_with_an_eager_call_and_prints_the_ratios() -> None:
    lines = quick_benchmark("values")
    assert lines[0].startswith("values runs against eager calls")
    assert re.search(r"eqx scan rnn .* cpu eager +\d+\.\d+s values +\d+\.\d+s \(\d+\.\d\dx", lines[1]), lines[1]
    assert re.search(r"peak eager [\d.]+ MB values [\d.]+ MB \(\d+\.\d\dx", lines[1]), lines[1]
    assert "validation verified" in lines[2], lines[2]
    assert lines[-1] in ("values ratios within target", "values ratios MISSED a target")
