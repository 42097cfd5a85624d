"""The ``from`` key: one of the workspace's own examples, run to learn a target's inputs.

``from = "tests/test_models.py::test_resnet"`` (a pytest test; a class test id
``tests/t.py::TestX::test_y``, a test file or a folder runs every test in it),
``from = "train.py --steps 1"`` (a script, run as ``__main__`` with those arguments) or
``from = "toy.py"`` (a module whose top level calls the target: imported). Paths are relative to
the recipe's folder (or, on the command line, to the current folder). Which of the three a file is
comes from the file itself: pytest's test file names, a ``__main__`` guard or a folder named
``examples``/``scripts``, else a module.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from jaxlsp.worker.protocol import ExampleSpec

_TEST_FILE = re.compile(r"(?:test_.*|.*_test)\.py")
_MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]", re.M)
SCRIPT_FOLDERS = frozenset({"examples", "example", "scripts", "script", "demos", "demo", "tutorials", "notebooks"})
FORM = '"PATH[::TEST] [ARGUMENTS]" (a test, a script with its arguments, or a module)'


class ExampleError(ValueError):
    """A ``from`` value that does not name a runnable example; the message says why."""


def example_kind(path: Path) -> str:
    """``test``, ``script`` or ``module`` for a file (a folder holds tests)."""
    if path.is_dir() or _TEST_FILE.fullmatch(path.name) or path.name == "conftest.py":
        return "test"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    if _MAIN_GUARD.search(text) or any(p in SCRIPT_FOLDERS for p in path.parent.parts[-3:]):
        return "script"
    return "module"


def parse_example(text: str, base: Path, *, kind: str | None = None, check: bool = True) -> ExampleSpec:
    """The example ``text`` names, its path resolved against ``base``; raises :class:`ExampleError`.
    Without ``check`` a missing file is not an error here (a recipe loads; the run says it)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ExampleError(f"expected {FORM}, got {text!r}: {exc}") from None
    if not words:
        raise ExampleError(f"expected {FORM}, got an empty string")
    head, argv = words[0], words[1:]
    rel, sep, test = head.partition("::")
    if not rel:
        raise ExampleError(f"expected {FORM}, got {text!r}")
    path = Path(os.path.normpath(base / Path(rel).expanduser()))
    if check and not path.exists():
        raise ExampleError(f"no such file: {path}")
    found = "test" if sep else kind or example_kind(path)
    if found == "test" and argv:
        raise ExampleError(f"a test takes no arguments (got {' '.join(argv)}); give them to a script")
    if sep and ((check and not path.is_file()) or not test or not all(p.isidentifier() for p in test.split("::"))):
        raise ExampleError(f"expected FILE.py::TEST (TEST a test name or Class::test), got {head!r}")
    spec: ExampleSpec = {"kind": found, "path": str(path), "text": text}  # type: ignore[typeddict-item]
    if found == "test":
        spec["tests"] = [f"{path}::{test}" if sep else str(path)]
    elif argv:
        spec["argv"] = argv
        spec["kind"] = "script"  # arguments: run as __main__, as a shell would
    return spec
