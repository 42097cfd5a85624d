"""Notebooks in the workspace index: code cells only, cell by cell, positions mapped to cells, and
read with the same care as .py files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jaxlsp.discovery import Classifier, WorkspaceIndex, iter_python_files
from jaxlsp.notebook import MAX_NOTEBOOK_BYTES, build_module, parse_cells
from tests.notebook.helpers import notebook_json, write_notebook

IMPORTS = "import jax\nimport jax.numpy as jnp\nimport flax.linen as nn\nimport equinox as eqx"
LINEN = "class MLP(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(4)(x)"


def entries(root: Path, name: str = "nb.ipynb") -> list[tuple[str, str, int, int]]:
    """(name, kind, cell, 1-based line in the cell) of each entrypoint."""
    index = WorkspaceIndex([root])
    found = Classifier(index).discover(root / name)
    cells = index.cells(root / name)
    assert cells is not None
    out = []
    for e in found.entrypoints:
        where = cells.locate(e.header.line)
        assert where is not None
        out.append((e.name, e.kind, where[0], where[1] + 1))
    return out


def test_markdown_magics_empty_cells_and_outputs(tmp_path: Path) -> None:
    write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("markdown", "# Notes\n\n```python\nclass NotCode(nn.Module): ...\n```"),
            ("code", "%matplotlib inline\n!pip install equinox\n" + IMPORTS),
            ("code", ""),
            ("code", "%%time\n" + LINEN),
            ("raw", "def raw_cell(): pass"),
            ("code", "files = !ls\n\n@jax.jit\ndef step(x):\n    return jnp.tanh(x)"),
        ],
    )
    assert entries(tmp_path) == [("MLP", "linen", 3, 2), ("step", "function", 5, 4)]


def test_a_cell_that_does_not_parse_costs_only_itself(tmp_path: Path) -> None:
    write_notebook(
        tmp_path / "nb.ipynb",
        [
            ("code", IMPORTS),
            ("code", "config = dict(width=3,\n    depth="),  # never closes its bracket
            ("code", "x = 1\n" + LINEN),  # would be swallowed by the bracket above in one file
            ("code", "def broken(:\n    return jnp.zeros(3)"),
            (
                "code",
                "class Block(eqx.Module):\n    w: jax.Array\n\n    def __call__(self, x):\n        return x @ self.w",
            ),
        ],
    )
    assert entries(tmp_path) == [("MLP", "linen", 2, 2), ("Block", "equinox", 4, 1)]


def test_a_class_redefined_in_a_later_cell_gets_a_lens_in_each(tmp_path: Path) -> None:
    write_notebook(tmp_path / "nb.ipynb", [("code", IMPORTS), ("code", LINEN), ("markdown", "v2"), ("code", LINEN)])
    assert entries(tmp_path) == [("MLP", "linen", 1, 1), ("MLP", "linen", 3, 1)]


def test_an_open_notebook_replaces_the_disk_one_and_closing_reads_disk_again(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [("code", IMPORTS), ("code", LINEN)])
    index = WorkspaceIndex([tmp_path])
    classifier = Classifier(index)
    assert [e.name for e in classifier.discover(path).entrypoints] == ["MLP"]
    edited = parse_cells(notebook_json([("code", IMPORTS), ("markdown", "new"), ("code", LINEN.replace("MLP", "Net"))]))
    index.set_notebook(path, build_module(edited))
    assert [e.name for e in classifier.discover(path).entrypoints] == ["Net"]
    cells = index.cells(path)
    assert cells is not None and [b.cell for b in cells.blocks] == [0, 2]
    assert index.text(path) == cells.text
    index.close(path)
    assert [e.name for e in classifier.discover(path).entrypoints] == ["MLP"]
    disk = index.cells(path)
    assert disk is not None and [b.cell for b in disk.blocks] == [0, 1]


def test_folders_list_notebooks_but_not_checkpoints(tmp_path: Path) -> None:
    write_notebook(tmp_path / "a.ipynb", [("code", IMPORTS)])
    (tmp_path / ".ipynb_checkpoints").mkdir()
    write_notebook(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb", [("code", IMPORTS)])
    (tmp_path / "b.py").write_text("import jax\n")
    assert sorted(p.name for p in iter_python_files(tmp_path)) == ["a.ipynb", "b.py"]


def test_unreadable_notebooks_say_why(tmp_path: Path) -> None:
    (tmp_path / "bad.ipynb").write_text("{ not json")
    (tmp_path / "r.ipynb").write_text(notebook_json([("code", "library(x)")], language="R"))
    os.mkfifo(tmp_path / "fifo.ipynb")
    big = tmp_path / "big.ipynb"
    with open(big, "w") as f:
        f.write(notebook_json([("code", IMPORTS)])[:-2])
        f.truncate(MAX_NOTEBOOK_BYTES + 10)
    index = WorkspaceIndex([tmp_path])
    for path in tmp_path.iterdir():
        assert index.text(path) is None
        assert index.cells(path) is None
    reasons = {p.name: r for p, r in index.unread.items()}
    assert "not valid notebook JSON" in reasons["bad.ipynb"]
    assert "kernel language is R" in reasons["r.ipynb"]
    assert "not a regular file" in reasons["fifo.ipynb"]
    assert "larger than" in reasons["big.ipynb"]
    assert index.skips(tmp_path / "bad.ipynb")[0].whole_file


def test_notebook_json_with_a_huge_code_cell_is_capped_like_a_file(tmp_path: Path) -> None:
    huge = "x = 1\n" * 200_000  # 1.2 MB of code: over the .py cap, under the notebook file cap
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": huge}], "nbformat": 4}))
    index = WorkspaceIndex([tmp_path])
    assert Classifier(index).discover(path).entrypoints == ()
    assert index.skips(path)[0].whole_file


def _scan_pauses(root: Path) -> list[Path | None]:
    return list(WorkspaceIndex([root]).scan())


def test_indexing_a_notebook_pauses_between_reading_parsing_and_building_it(tmp_path: Path) -> None:
    """The 10,000-cell notebook was read, parsed into cells and built into its module in one step
    of the index's scan: 40-85 ms of the event loop (the soak's watchdog, issue 25). The scan
    pauses (None) after reading it and after parsing its cells, then summarises as for a file."""
    notebook, script = tmp_path / "nb", tmp_path / "py"
    notebook.mkdir()
    script.mkdir()
    code = "import jax\n\n\n@jax.jit\ndef f(x):\n    return x\n"
    cell = {"cell_type": "code", "metadata": {}, "source": code, "outputs": [], "execution_count": None}
    (notebook / "m.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (script / "m.py").write_text(code)
    as_notebook, as_script = _scan_pauses(notebook), _scan_pauses(script)
    assert as_notebook[-1] == (notebook / "m.ipynb").resolve() and as_script[-1] == (script / "m.py").resolve()
    assert as_notebook.count(None) == as_script.count(None) + 2, (as_notebook, as_script)
