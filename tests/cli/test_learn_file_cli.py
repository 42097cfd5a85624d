"""``jaxlsp learn FILE`` (issue 56): only the examples whose imports reach the file run, nearest
first, side by side; the budget always gets an answer with what was learned so far; and a learn
with nothing changed runs nothing, while a save runs again only the examples that load it.

The fixture (tests/workspaces/learn_reach): ``pkg/layers.py``, which ``tests/test_layers.py``
imports and ``tests/test_blocks.py`` reaches through ``pkg/blocks.py``, and an unrelated
``tests/test_slow.py`` that sleeps ten minutes after its one call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import deadlines
from tests.cli.helpers import run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "learn_reach"
SLOW = 600  # seconds tests/test_slow.py sleeps


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "learn_reach"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _learn(root: Path, *args: str) -> dict[str, Any]:
    learned = run(["learn", "--json", *args], cwd=root)
    assert learned.returncode == 0, learned.stderr
    report: dict[str, Any] = json.loads(learned.stdout)
    return report


def _outcomes(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["text"], e["outcome"]) for e in report["examples"]]


def test_learn_on_a_file_runs_only_the_examples_whose_imports_reach_it_nearest_first(repo: Path, cache: Path) -> None:
    report = _learn(repo, "pkg/layers.py")
    # test_layers imports it; test_blocks through pkg/blocks.py: one step further, listed after it
    assert _outcomes(report) == [("tests/test_layers.py", "finished"), ("tests/test_blocks.py", "finished")]
    assert {"pkg/layers.py::dense", "pkg/blocks.py::block"} <= set(report["targets"])
    assert "pkg/slow.py::total" not in report["targets"]
    assert report["failures"] == [] and report["seconds"] < SLOW  # the slow test never ran

    alone = run(["learn", "pyproject.toml"], cwd=repo)
    assert alone.returncode == 1
    assert "no test file or documented script imports" in alone.stderr


def test_a_budget_that_runs_out_answers_in_time_with_what_was_learned(repo: Path, cache: Path) -> None:
    budget = deadlines.scaled(20)  # the whole run's, shorter than the example's own time limit
    report = _learn(repo, "tests/test_slow.py", "--budget", f"{budget:.1f}", "--timeout", f"{SLOW * 2}")
    assert report["stopped"] == "out of time"
    assert report["seconds"] <= budget + 1.0
    assert _outcomes(report) == [("tests/test_slow.py", "stopped")]
    assert report["targets"] == ["pkg/slow.py::total"]  # its one call, made before the long wait


def test_a_second_learn_runs_nothing_and_a_save_runs_again_only_what_loads_the_file(repo: Path, cache: Path) -> None:
    first = _learn(repo, "pkg/layers.py")
    assert (first["ran"], first["cached"]) == (2, 0)

    again = _learn(repo, "pkg/layers.py")  # another process: what was learned is in the per-user cache
    assert (again["ran"], again["cached"]) == (0, 2)
    assert _outcomes(again) == [("tests/test_layers.py", "cached"), ("tests/test_blocks.py", "cached")]
    assert again["targets"] == first["targets"]

    slow = repo / "pkg" / "slow.py"
    slow.write_text(slow.read_text() + "\n\ndef unused(x):\n    return x\n")  # loaded by neither
    assert (_learn(repo, "pkg/layers.py")["ran"]) == 0

    blocks = repo / "pkg" / "blocks.py"
    blocks.write_text(blocks.read_text().replace("+ x", "- x"))
    saved = _learn(repo, "pkg/layers.py")
    assert _outcomes(saved) == [("tests/test_layers.py", "cached"), ("tests/test_blocks.py", "finished")]

    everything = _learn(repo, "pkg/layers.py", "--again")
    assert (everything["ran"], everything["cached"]) == (2, 0)
