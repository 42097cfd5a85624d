"""Learned calls of the objects real libraries pass around (issue 56.7's named bugs, found on
lineax and GPJax): each is learned from ``tests/workspaces/learned_objects``'s tests and traced
back from what was learned, as ``jaxlsp learn`` then ``jaxlsp trace`` does for a user.

- ``pkg/operators.py``: singledispatch registrations, each a top-level ``def _`` (lineax's 26);
- ``tests/helpers.py::make_diagonal``: takes a dataclass whose own ``__init__`` takes other
  arguments than its fields (equinox's ``GetKey``, lineax's 9 ``make_*_operator`` helpers);
- ``pkg/means.py::Constant``: an NNX module that keeps an array as a plain attribute (GPJax's
  ``Constant`` and ``Zero`` means);
- ``tests/workspaces/learned_hooked``: a package its ``conftest.py`` imports through jaxtyping's
  import hook (GPJax's), which a run of an example must still reach."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "learned_objects"
HOOKED = Path(__file__).resolve().parents[1] / "workspaces" / "learned_hooked"


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


def _graph(root: Path, target: str) -> dict[str, Any]:
    """The graph of ``target`` traced from its learned call."""
    out = root / "graph.json"
    traced = run(["trace", target, "-o", str(out)], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "(learned)" in traced.stdout, traced.stdout
    return expanded(out)


def _trace(root: Path, target: str) -> list[list[int]]:
    """The output shapes of ``target`` traced from its learned call."""
    data = _graph(root, target)
    shapes = {v["id"]: v["shape"] for v in data["values"]}
    return [shapes[o["value"]] for o in data["outputs"]]


def test_a_name_defined_again_is_learned_from_the_calls_of_the_definition_it_ends_bound_to(learned: Path) -> None:
    # test_diagonal calls the first ``_`` first; a trace of ``_`` runs the last (Sum's), which
    # was given that Diagonal: "'Diagonal' object has no attribute 'first'"
    assert _trace(learned, "pkg/operators.py::_") == [[4, 4]]


def test_a_dataclass_with_an_init_of_its_own_is_rebuilt_from_that_inits_parameters(learned: Path) -> None:
    # written from its fields before: GetKey(seed=7, call=0, key=...) refused by its __init__
    assert _trace(learned, "tests/helpers.py::make_diagonal") == [[4]]


def test_an_nnx_modules_plain_array_attribute_is_an_input_of_its_abstract_init(learned: Path) -> None:
    # It stayed what the abstract init left in it, which nnx.split keeps as a static attribute:
    # under flax 0.12.0 a ShapeDtypeStruct, which the trace met in arithmetic ("unsupported
    # operand type(s) for *: 'DynamicJaxprTracer' and 'ShapeDtypeStruct'", GPJax's lock); under
    # 0.12.8 the init's own tracer, escaped and taken in as an unnamed constant (``const/0``).
    data = _graph(learned, "pkg/means.py::Constant")
    shapes = {v["id"]: v["shape"] for v in data["values"]}
    assert [(i["label"], i["role"], shapes[i["value"]]) for i in data["inputs"]] == [
        ("constant", "state", [1]),
        ("args/0", "input", [5, 2]),
    ]
    assert [shapes[o["value"]] for o in data["outputs"]] == [[5, 1]]


def test_a_run_reaches_a_target_whose_package_a_conftest_imports_through_jaxtypings_hook(
    tmp_path: Path, cache: Path
) -> None:
    # jaxtyping's finder, put in front of the run's own by the conftest, loaded pkg/ops.py with
    # its own loader: "finished without calling scale ... was never imported by the run" (every
    # GPJax target an example replays)
    root = tmp_path / "learned_hooked"
    shutil.copytree(HOOKED, root, ignore=shutil.ignore_patterns("__pycache__"))
    out = root / "graph.json"
    traced = run(["trace", "pkg/ops.py::scale", "--from", "tests/test_ops.py", "-o", str(out)], cwd=root)
    assert traced.returncode == 0, traced.stderr
    data = expanded(out)
    shapes = {v["id"]: v["shape"] for v in data["values"]}
    assert [shapes[o["value"]] for o in data["outputs"]] == [[4, 2]]
