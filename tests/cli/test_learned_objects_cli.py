"""Learned calls of the objects real libraries pass around (issue 56.7's named bugs, found on
lineax and GPJax): each is learned from ``tests/workspaces/learned_objects``'s tests and traced
back from what was learned, as ``jaxlsp learn`` then ``jaxlsp trace`` does for a user.

- ``pkg/operators.py``: singledispatch registrations, each a top-level ``def _`` (lineax's 26);
- ``tests/helpers.py::make_diagonal``: takes a dataclass whose own ``__init__`` takes other
  arguments than its fields (equinox's ``GetKey``, lineax's 9 ``make_*_operator`` helpers)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "learned_objects"


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The fixture's copy after one ``jaxlsp learn`` of its tests, with a per-user cache of its
    own that the traces of this module read (one learn for all of them)."""
    base = tmp_path_factory.mktemp("learned_objects")
    root = base / "learned_objects"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(base / "cache"))
        done = run(["learn", "--json", "tests"], cwd=root)
        assert done.returncode == 0, done.stderr
        report: dict[str, Any] = json.loads(done.stdout)
        assert all(e["outcome"] == "finished" for e in report["examples"]), report["examples"]
        yield root


def _trace(root: Path, target: str) -> list[list[int]]:
    """The output shapes of ``target`` traced from its learned call."""
    out = root / "graph.json"
    traced = run(["trace", target, "-o", str(out)], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "(learned)" in traced.stdout, traced.stdout
    data = expanded(out)
    shapes = {v["id"]: v["shape"] for v in data["values"]}
    return [shapes[o["value"]] for o in data["outputs"]]


def test_a_name_defined_again_is_learned_from_the_calls_of_the_definition_it_ends_bound_to(learned: Path) -> None:
    # test_diagonal calls the first ``_`` first; a trace of ``_`` runs the last (Sum's), which
    # was given that Diagonal: "'Diagonal' object has no attribute 'first'"
    assert _trace(learned, "pkg/operators.py::_") == [[4, 4]]


def test_a_dataclass_with_an_init_of_its_own_is_rebuilt_from_that_inits_parameters(learned: Path) -> None:
    # written from its fields before: GetKey(seed=7, call=0, key=...) refused by its __init__
    assert _trace(learned, "tests/helpers.py::make_diagonal") == [[4]]
