"""A notebook target's module in the worker: the cells up to the target's, definitions only or the
cells above run in order, redefinitions, cells that do not parse, errors placed in their cell."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.helpers import write_notebook
from tests.worker.conftest import array, graph_of, request

IMPORTS = "import jax\nimport jax.numpy as jnp"

Run = Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture
def nb_run(run_capture: Run) -> Iterator[Run]:
    yield run_capture
    sys.modules.pop("nb", None)


def trace(run: Run, root: Path, name: str, *args: Any, **profile: Any) -> dict[str, Any]:
    profile.setdefault("load", "definitions")
    return run(request("nb.ipynb", name, *args, workspace=root, **profile))


def notes(result: dict[str, Any]) -> list[str]:
    return list(graph_of(result)["coverage"]["notes"])


def test_definitions_run_nothing_else_and_the_later_cells_not_at_all(tmp_path: Path, nb_run: Run) -> None:
    marker = tmp_path / "ran"
    write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("code", IMPORTS + f"\nopen({str(marker)!r}, 'w').close()"),
            ("code", "SCALE = 3.0\ndef f(x):\n    return jnp.sin(x) * SCALE"),
            ("code", "raise SystemExit('a later cell never runs')"),
        ],
    )
    graph = graph_of(trace(nb_run, tmp_path, "f", array(3)))
    assert not marker.exists()
    assert [n["primitive"] for n in graph["nodes"]] == ["sin", "mul"]
    assert graph["nodes"][0]["source"]["cell"] == 1 and graph["nodes"][0]["source"]["line"] == 3


def test_load_cells_runs_the_cells_above_in_order_and_lists_what_it_skipped(tmp_path: Path, nb_run: Run) -> None:
    write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("markdown", "Set-up"),
            ("code", "%env XLA_FLAGS=--xla_dump_to=/nowhere\n" + IMPORTS + "\n!echo never"),
            ("code", "table = jnp.arange(4.0) * 2  # a call: only load = cells runs it"),
            (
                "code",
                "def f(x):\n    return x + table\n\nprint(undefined_name)  # the target's own cell: definitions only",
            ),
        ],
    )
    skipped = trace(nb_run, tmp_path, "f", array(4))
    assert not skipped["ok"] and "table" in skipped["error"]["message"]
    assert (
        "cell 2 line 1 of nb.ipynb" in skipped["error"]["message"] and 'load = "cells"' in skipped["error"]["message"]
    )
    ran = notes(trace(nb_run, tmp_path, "f", array(4), load="cells"))
    assert any("cell 1 line 1: %env XLA_FLAGS" in note and "cell 1 line 4: !echo never" in note for note in ran), ran


def test_a_redefined_class_is_its_last_definition_up_to_the_target_cell(tmp_path: Path, nb_run: Run) -> None:
    write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("code", IMPORTS),
            ("code", "def f(x):\n    return jnp.sin(x)"),
            ("code", "def f(x):\n    return jnp.cos(x)"),
        ],
    )
    latest = graph_of(trace(nb_run, tmp_path, "f", array(2)))
    assert [n["primitive"] for n in latest["nodes"]] == ["cos"] and latest["target"]["cell"] == 2
    req = request("nb.ipynb", "f", array(2), workspace=tmp_path, load="definitions")
    req["target"]["cell"] = 1  # the lens on the first definition
    first = graph_of(nb_run(req))
    assert [n["primitive"] for n in first["nodes"]] == ["sin"] and first["target"]["cell"] == 1


def test_a_cell_above_that_does_not_parse_is_skipped_and_said(tmp_path: Path, nb_run: Run) -> None:
    write_notebook(
        tmp_path / "nb.ipynb",
        [("code", IMPORTS), ("code", "def half(:\n"), ("code", "def f(x):\n    return jnp.tanh(x)")],
    )
    said = notes(trace(nb_run, tmp_path, "f", array(2)))
    assert any(note.startswith("cell 1 was skipped: it does not parse") for note in said), said


def test_the_target_cell_must_parse_and_the_error_names_its_cell(tmp_path: Path, nb_run: Run) -> None:
    write_notebook(tmp_path / "nb.ipynb", [("code", IMPORTS), ("code", "def f(x):\n    return jnp.tanh(x))")])
    req = request("nb.ipynb", "f", array(2), workspace=tmp_path, load="definitions")
    req["target"]["cell"] = 1
    result = nb_run(req)
    assert not result["ok"] and result["error"]["kind"] == "import"
    frame = result["error"]["frame"]
    assert (frame["cell"], frame["line"]) == (1, 2) and frame["path"].endswith("nb.ipynb")


def test_a_trace_error_points_at_its_cell_line(tmp_path: Path, nb_run: Run) -> None:
    write_notebook(
        tmp_path / "nb.ipynb",
        [("markdown", "x"), ("code", IMPORTS), ("code", "def f(x):\n    y = x * 2\n    return y @ jnp.ones((5, 5))")],
    )
    result = trace(nb_run, tmp_path, "f", array(3))
    assert not result["ok"] and result["error"]["kind"] == "trace"
    assert (result["error"]["frame"]["cell"], result["error"]["frame"]["line"]) == (2, 3)
