"""An example's pytest run in a worker that imported a pytest plugin first, as the warm spare
preloads the installed libraries earlier captures imported (jaxtyping, a ``pytest11`` plugin):
pytest then warns that it cannot rewrite the plugin's asserts, and a project whose pytest
configuration turns warnings into errors (interpax's ``filterwarnings = error``) failed every
replayed example in the spare with that warning (worker/examples/runners.py; issue 56)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests import deadlines

SCRIPT = """
import sys

import jaxtyping  # noqa: F401  (a pytest plugin, imported before pytest runs: the warm spare's preload)

from jaxlsp.worker.core.failures import Workspace
from jaxlsp.worker.examples.learning import Unwatched
from jaxlsp.worker.examples.runners import run_example

root = sys.argv[1]
test = root + "/tests/test_a.py"
how, exc, detail = run_example({"kind": "test", "path": test, "text": "tests/test_a.py", "tests": [test]}, Unwatched(Workspace(root)), root)
print("RESULT", how, type(exc).__name__ if exc is not None else None, detail)
"""


def test_a_preloaded_plugin_does_not_fail_a_project_that_errors_on_warnings(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    (root / "tests" / "test_a.py").write_text("def test_a():\n    assert 1 + 1 == 2\n")
    done = deadlines.run(
        [sys.executable, "-c", SCRIPT, str(root)], 60, cwd=root, capture_output=True, text=True, check=False
    )
    assert "RESULT finished None" in done.stdout, done.stdout + done.stderr
