"""The examples learning keeps for a target whose learned call no recipe can spell
(capture/inputs/replays.py, issue 56.7): kept per interpreter with the test that made the call,
dropped when a caller's file changed, and planned (capture/inputs/plan.py) as ``--from`` runs an
example, after a spellable learned call, which wins."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from jaxlsp.capture.environment.interpreters import select_interpreter
from jaxlsp.capture.inputs.plan import plan
from jaxlsp.capture.inputs.replays import ReplayStore, example_of
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.capture.request import TraceRequest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "tests").mkdir(parents=True)
    (root / "solve.py").write_text("def solve(term, y0):\n    return term(y0)\n")
    (root / "tests" / "test_solve.py").write_text(
        "from solve import solve\n\n\ndef test_decay():\n    solve(lambda y: -y, 1.0)\n"
    )
    return root


def _unspelled(root: Path) -> dict[str, object]:
    caller = root / "tests" / "test_solve.py"
    return {
        "path": str(root / "solve.py"),
        "name": "solve",
        "kind": "function",
        "test": "tests/test_solve.py::test_decay[a-b]",  # pytest's node id, as the worker read it
        "callsite": {"path": str(caller), "line": 5},
        "sources": {str(caller): hashlib.sha256(caller.read_bytes()).hexdigest()},
    }


def _example(root: Path) -> dict[str, object]:
    path = root / "tests" / "test_solve.py"
    return {"kind": "test", "path": str(path), "text": "tests/test_solve.py", "tests": [str(path)]}


def test_the_test_that_made_the_call_is_kept_and_a_changed_caller_drops_it(ws: Path, tmp_path: Path) -> None:
    store = ReplayStore(ws, tmp_path / "cache")
    kept = store.add([_unspelled(ws)], "/py/a", _example(ws))
    assert kept == [SignatureStore.key("/py/a", str(ws / "solve.py"), "solve")]
    found = store.lookup("/py/a", ws / "solve.py", "solve")
    assert found is not None
    # one test, its parameters left out (pytest runs them all; the first call stops it)
    assert found.spec() == {
        "kind": "test",
        "path": str(ws / "tests" / "test_solve.py"),
        "text": "tests/test_solve.py::test_decay",
        "tests": [f"{ws / 'tests' / 'test_solve.py'}::test_decay"],
    }
    assert store.lookup("/py/b", ws / "solve.py", "solve") is None  # another interpreter learned nothing
    assert not list(ws.rglob("*.json"))  # nothing in the workspace
    (ws / "solve.py").write_text("def solve(term, y0):\n    return term(y0) * 2\n")  # the target's own file
    assert store.lookup("/py/a", ws / "solve.py", "solve") is not None  # replayed as it is now
    (ws / "tests" / "test_solve.py").write_text("def test_decay():\n    pass\n")  # the caller
    assert store.lookup("/py/a", ws / "solve.py", "solve") is None
    assert store.keys("/py/a") == set()  # dropped, not kept for later


def test_without_a_running_test_the_example_itself_is_kept() -> None:
    script = {"kind": "script", "path": "/ws/train.py", "text": "train.py --steps 3", "argv": ["--steps", "3"]}
    assert example_of(None, script) == script
    whole = {"kind": "test", "path": "/ws/tests/test_a.py", "text": "tests/test_a.py", "tests": ["/ws/tests/test_a.py"]}
    assert example_of(None, whole) == whole
    assert example_of("tests/test_other.py::test_x", whole) == whole  # another file's node: not this run's
    assert example_of("tests/test_a.py::TestA::test_x", whole)["tests"] == ["/ws/tests/test_a.py::TestA::test_x"]


def _request(ws: Path, cache: Path) -> TraceRequest:
    return TraceRequest(ws / "solve.py", "solve", ws, python=sys.executable, signature_cache=cache, run_examples=False)


def test_planning_replays_the_kept_example_and_a_spellable_learned_call_wins(ws: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    python = select_interpreter(workspace_root=ws, request=sys.executable).python
    ReplayStore(ws, cache).add([_unspelled(ws)], python, _example(ws))

    replayed = plan(_request(ws, cache))
    assert replayed.origin.how == "learned"
    assert replayed.origin.line() == "inputs from tests/test_solve.py::test_decay (learned example)"
    assert replayed.resolved.profile["example"]["tests"] == [f"{ws / 'tests' / 'test_solve.py'}::test_decay"]

    spelled = dict(_unspelled(ws), table={"kind": "function", "inputs": {"args": [{"kind": "array", "shape": [4]}]}})
    assert SignatureStore(ws, cache).add([spelled], python, "tests/test_solve.py") == 1
    learned = plan(_request(ws, cache))
    assert learned.origin.line() == "inputs from a learned call at tests/test_solve.py:5 (learned)"
    assert "example" not in learned.resolved.profile
