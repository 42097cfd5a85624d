"""What a learned call traces is what the tests ran (issue 56.8), in the author's names where the
tests disagree on a size (issue 56.5). The workspace's tests call a function, a Linen, an NNX and
an Equinox module with NumPy int64 and float64 arrays under JAX's default x64 off (so JAX computes
in int32 and float32), with batch 3 in one test file and 5 in the other."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import deadlines
from tests.cli.helpers import expanded, run

pytest.importorskip("flax")
pytest.importorskip("equinox")

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "learned_batches"
TARGETS = ("score", "masked_mean", "Tagger", "Scaler", "Mixer")  # a function of each kind, Linen, NNX, Equinox


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "learned_batches"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _ran(root: Path, batch: int) -> dict[str, tuple[str, list[int]]]:
    """Each target's output (dtype, shape) as the tests' own calls make it, run as the tests run."""
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/tests']; from calls import run_all; "
        "print(json.dumps({k: [str(v.dtype), list(v.shape)] for k, v in run_all(int(sys.argv[2])).items()}))"
    )
    done = deadlines.run(
        [sys.executable, "-c", code, str(root), str(batch)], 120, capture_output=True, text=True, check=True
    )
    return {k: (v[0], v[1]) for k, v in json.loads(done.stdout).items()}


def _traced(root: Path, name: str) -> tuple[list[tuple[str, list[Any]]], str]:
    """The output (dtype, shape) of ``name`` traced on what was learned, and the trace's report."""
    traced = run(["trace", f"tagger/models.py::{name}", "-o", f"{name}.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    graph = expanded(root / f"{name}.json")
    values = {v["id"]: v for v in graph["values"]}
    return [(values[o["value"]]["dtype"], values[o["value"]]["shape"]) for o in graph["outputs"]], traced.stdout


def test_a_call_with_numpy_64_bit_arrays_traces_the_32_bit_program_the_test_ran(repo: Path) -> None:
    learned = run(["learn", "tests/test_three.py", "--idle", "3"], cwd=repo)
    assert learned.returncode == 0, learned.stderr
    ran = _ran(repo, 3)
    for name in TARGETS:
        outputs, report = _traced(repo, name)
        assert "(learned)" in report, report
        assert outputs == [ran[name]], name  # float32, not float64; the test's own sizes


def test_a_batch_the_tests_disagree_on_is_a_symbol_with_the_dtype_the_tests_computed(repo: Path) -> None:
    learned = run(["learn", "--idle", "3"], cwd=repo)
    assert learned.returncode == 0, learned.stderr
    three, five = _ran(repo, 3), _ran(repo, 5)
    symbol = {"score": "batch", "masked_mean": "rows", "Tagger": "batch", "Scaler": "batch", "Mixer": "batch"}
    for name in TARGETS:
        outputs, report = _traced(repo, name)
        [(dtype, shape)] = outputs
        assert dtype == three[name][0] == five[name][0], name
        expected = [symbol[name] if a != b else a for a, b in zip(three[name][1], five[name][1], strict=True)]
        assert shape == expected, (name, shape)
        assert f"symbolic where they disagree: {symbol[name]} = 3, 5" in report, report
    # unrolled loops over int(rows): the symbolic trace fails, and the newest concrete call is used
    outputs, report = _traced(repo, "unrolled")
    assert outputs == [three["unrolled"]] == [five["unrolled"]]
    assert "concrete: batch failed symbolically" in report, report
    again = run(["trace", "tagger/models.py::unrolled"], cwd=repo)  # remembered: straight to the concrete call
    assert again.returncode == 0 and "concrete: batch failed symbolically" in again.stdout, again.stdout


def test_a_values_run_of_a_target_whose_calls_disagree_runs_on_the_newest_call(repo: Path) -> None:
    """The graph is symbolic where the calls disagree; a values run needs arrays, and takes the
    newest learned call's sizes rather than asking for --dim."""
    learned = run(["learn", "--idle", "3"], cwd=repo)
    assert learned.returncode == 0, learned.stderr
    traced = run(["trace", "tagger/models.py::score", "--values", "-o", "score.json"], cwd=repo)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert "--dim" not in traced.stdout + traced.stderr
    graph = expanded(repo / "score.json")
    values = {v["id"]: v for v in graph["values"]}
    [output] = graph["outputs"]
    shape = values[output["value"]]["shape"]
    assert all(isinstance(d, int) for d in shape) and shape[0] in (3, 5), shape
