"""The discovery benchmark runs end to end on tiny inputs (no timing is asserted)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "discovery.py"
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("discovery_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_scan_of_the_examples(bench: ModuleType) -> None:
    result = bench.measure_scan([EXAMPLES], [EXAMPLES])
    assert result.files == len(list(EXAMPLES.rglob("*.py"))) + len(list(EXAMPLES.rglob("*.ipynb")))
    assert result.lines > 0 and result.size > 0
    assert result.parse_failures == 0
    assert 0 < result.discovered <= result.files
    assert result.entrypoints >= 10
    assert result.parse_seconds > 0 and result.discover_seconds > 0
    assert result.ratio > 0


def test_edit_of_a_small_model_file(bench: ModuleType) -> None:
    text = bench.model_file(500)
    ast.parse(text)
    assert 500 <= text.count("\n") < 1_000
    result = bench.measure_edit(text, edits=3, parses=1)
    assert result.lines == text.count("\n")
    assert result.entrypoints >= 10
    assert result.misses_per_edit == 1  # only the edited statement is summarized again
    assert result.parse_seconds > 0 and result.edit_seconds > 0


def test_notebook_of_a_small_model_file(bench: ModuleType) -> None:
    text = bench.model_file(300)
    result = bench.measure_notebook(text, runs=1)
    assert result.entrypoints >= 10  # the same entrypoints as the file (checked inside)
    assert result.file_lines == result.notebook_lines  # the file holds the notebook's code, line for line
    assert result.notebook_seconds > 0 and result.file_seconds > 0 and result.ratio > 0


def test_main_prints_the_summary(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    code = bench.main(["--scan", str(EXAMPLES), "--lines", "500", "--edits", "2", "--parses", "1", "--runs", "1"])
    assert code in (0, 1)  # tiny inputs prove nothing about speed
    out = capsys.readouterr().out
    assert "(a) whole-tree scan" in out and "(b) one-line edit" in out and "(d) call sites" in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("discovery scan ratio ") and "; edit ratio " in summary
    assert "; notebook per-line ratio " in summary and "; call-site ratio " in summary
    assert "(target <= 2.0)" in summary and "(target <= 0.25)" in summary
    assert "(target <= 1.05)" in summary and "(target <= 0.1)" in summary
    assert "(c) the model file as a notebook" in out


def test_call_sites_of_the_examples(bench: ModuleType) -> None:
    result = bench.measure_callsites([EXAMPLES], [EXAMPLES], sample=5)
    assert result.entrypoints >= 10 and result.sampled == 5 and len(result.seconds) == 5
    assert result.scan_seconds > 0 and result.ratio > 0


def test_packages_are_found_without_importing_them() -> None:
    # A fresh interpreter: other tests in this process may have imported flax on purpose.
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('b', {str(SCRIPT)!r})\n"
        "b = sys.modules['b'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)\n"
        "dirs = [b.package_dir(n) for n in ('flax', 'jax')]\n"
        "assert all((d / '__init__.py').is_file() for d in dirs), dirs\n"
        "assert not {'jax', 'flax'} & set(sys.modules), sorted(m for m in sys.modules if 'jax' in m or 'flax' in m)\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT, timeout=scaled(120))
