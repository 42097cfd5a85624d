"""A call a recipe cannot spell still teaches its target (issue 56.7): ``jaxlsp learn`` keeps the
test that made it (an ODE-like ``solve(ODETerm(lambda t, y: -y), y0)``, whose term holds a Python
function), and a later ``jaxlsp trace`` of the target replays that test up to the call, says so, and
gives the graph a cold ``--from`` of the same test gives. Before, the call was dropped: the learn
taught nothing and the trace fell back to the static call sites' examples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "learned_replay"
LEARNED = "inputs from tests/test_solve.py::test_decay (learned example)"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "learned_replay"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _shapes(graph: dict[str, Any], side: str) -> list[list[int]]:
    shapes = {v["id"]: v["shape"] for v in graph["values"]}
    return [shapes[item["value"]] for item in graph[side]]


def test_a_call_no_recipe_can_spell_is_replayed_from_the_test_that_made_it(repo: Path, cache: Path) -> None:
    learned = run(["learn", "--json"], cwd=repo)
    assert learned.returncode == 0, learned.stderr
    report = json.loads(learned.stdout)
    assert report["targets"] == ["odelike/solve.py::solve"]  # taught, though its term cannot be spelled
    assert report["failures"] == []
    assert list((cache / "jaxlsp" / "learned-replays").glob("*.json"))  # in the per-user cache
    assert not list(repo.rglob("*.json"))  # nothing in the workspace

    replayed = run(["trace", "odelike/solve.py::solve", "-o", "replayed.json"], cwd=repo)
    assert replayed.returncode == 0, replayed.stderr
    assert LEARNED in replayed.stdout.splitlines()
    graph = expanded(repo / "replayed.json")
    assert _shapes(graph, "inputs") == [[3, 5]] and _shapes(graph, "outputs") == [[2, 3, 5]]  # the test's call

    cold = run(
        ["trace", "odelike/solve.py::solve", "--from", "tests/test_solve.py::test_decay", "-o", "cold.json"], cwd=repo
    )
    assert cold.returncode == 0, cold.stderr
    assert graph == expanded(repo / "cold.json")  # fresh: what a cold --from of the same test gives

    again = run(["learn", "--json"], cwd=repo)
    assert json.loads(again.stdout)["cached"] == 1  # what it taught is still held: not run again

    test = repo / "tests" / "test_solve.py"
    test.write_text(test.read_text().replace("jnp.ones((3, 5))", "jnp.ones((4, 5))"))
    changed = run(["trace", "odelike/solve.py::solve"], cwd=repo)
    assert LEARNED not in changed.stdout.splitlines()  # its caller changed: the call may be gone
