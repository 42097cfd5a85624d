"""A learned call that fails at a value check replays the test that made it (issue 56): an Equinox
interpolant whose constructor checks its knots with a Python ``if jnp.any(jnp.diff(x) <= 0)``, as
interpax's ``PPoly`` does. Its learned call spells shapes and dtypes only and the worker builds the
module abstractly, so the check fails (``TracerBoolConversionError``); the trace then replays the
test up to the call, says why, and gives the graph a cold ``--from`` of the same test gives. The
next trace replays it at once. A function that checks its own (traced) arguments fails in the
replay too, and the next trace goes back to the learned call alone. Before, both stayed dark."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "learned_checked"
TEST = "tests/test_spline.py::test_interpolates_between_knots"
FAILED = "the learned call failed at checked/spline.py:10: TracerBoolConversionError"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "learned_checked"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _origin(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("inputs from "))


def test_a_learned_call_that_fails_at_a_value_check_replays_the_test_that_made_it(repo: Path, cache: Path) -> None:
    learned = run(["learn", "--json"], cwd=repo)
    assert learned.returncode == 0, learned.stderr
    assert json.loads(learned.stdout)["targets"] == ["checked/spline.py::Linear", "checked/spline.py::knots"]

    replayed = run(["trace", "checked/spline.py::Linear", "-o", "replayed.json"], cwd=repo)
    assert replayed.returncode == 0, replayed.stderr
    origin = _origin(replayed.stdout)
    assert origin.startswith(f"inputs from {TEST} (learned example; {FAILED}"), origin
    cold = run(["trace", "checked/spline.py::Linear", "--from", TEST, "-o", "cold.json"], cwd=repo)
    assert cold.returncode == 0, cold.stderr
    assert expanded(repo / "replayed.json") == expanded(repo / "cold.json")  # the test's own call, fresh

    again = run(["trace", "checked/spline.py::Linear", "-o", "again.json"], cwd=repo)
    assert again.returncode == 0, again.stderr
    assert "before it:" not in again.stdout + again.stderr  # no learned call tried first this time
    assert _origin(again.stdout) == origin
    assert expanded(repo / "again.json") == expanded(repo / "cold.json")

    # ``knots`` checks its own arguments, which the replay traces as well: it fails there too, and
    # the next trace does not run the test again
    checked = run(["trace", "checked/spline.py::knots"], cwd=repo)
    assert checked.returncode != 0 and "TracerBoolConversionError" in checked.stderr
    assert f"running {TEST}" in checked.stdout + checked.stderr
    after = run(["trace", "checked/spline.py::knots"], cwd=repo)
    assert after.returncode != 0 and "TracerBoolConversionError" in after.stderr
    assert "running " not in after.stdout + after.stderr

    spline = repo / "checked" / "spline.py"
    spline.write_text(spline.read_text().replace("if check and", "if False and"))  # the check gone
    edited = run(["trace", "checked/spline.py::knots"], cwd=repo)
    assert edited.returncode == 0, edited.stderr
    assert _origin(edited.stdout).startswith("inputs from a learned call at checked/spline.py:20 (learned)")
