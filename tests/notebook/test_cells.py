"""jaxlsp.notebook: cells read from real-looking notebooks, the module text, positions both ways."""

from __future__ import annotations

import json

import pytest

from jaxlsp.notebook import Cell, NotebookError, build_module, cells_shown, parse_cells, read_module, source_digest
from tests.notebook.helpers import notebook_json

CELLS = [
    ("markdown", "# Title\n\nSome text."),
    ("code", "%matplotlib inline\nimport jax"),
    ("code", ""),
    ("markdown", "## Model"),
    ("code", "class MLP:\n    def __call__(self, x):\n        return x\n"),
    ("raw", "not code"),
    ("code", "def broken(:\n    pass"),
    ("code", "y = 1"),
]


def test_cells_keep_their_index_markdown_counted() -> None:
    cells = parse_cells(notebook_json(CELLS))
    assert [c.index for c in cells] == list(range(len(CELLS)))
    assert [c.kind for c in cells] == [kind for kind, _ in CELLS]
    assert cells[4].source == CELLS[4][1]  # list-of-lines sources joined back


def test_module_holds_code_cells_in_order_with_lines_unshifted() -> None:
    module = read_module(notebook_json(CELLS))
    assert [b.cell for b in module.blocks] == [1, 2, 4, 6, 7]
    lines = module.text.split("\n")
    assert lines[0] == "pass" and lines[1] == "import jax"  # the magic, neutralised in place
    block = module.block(4)
    assert block is not None and lines[block.start] == "class MLP:"
    assert block.lines == 4  # the trailing newline is a line of the cell, as an editor shows it
    assert module.block(2) is not None and module.block(2).lines == 1  # an empty cell is one empty line
    assert module.block(0) is None and module.block(5) is None


@pytest.mark.parametrize("cell,line", [(1, 0), (1, 1), (2, 0), (4, 0), (4, 2), (6, 1), (7, 0)])
def test_positions_map_both_ways(cell: int, line: int) -> None:
    module = read_module(notebook_json(CELLS))
    at = module.module_line(cell, line)
    assert at is not None
    assert module.locate(at) == (cell, line)


def test_positions_outside_code_cells_map_to_nothing() -> None:
    module = read_module(notebook_json(CELLS))
    assert module.module_line(0, 0) is None  # markdown
    assert module.module_line(4, 4) is None  # past the cell's last line
    assert module.locate(-1) is None
    assert module.locate(len(module.text.split("\n"))) is None


def test_upto_is_a_prefix_of_the_whole_module() -> None:
    cells = parse_cells(notebook_json(CELLS))
    whole, upto = build_module(cells), build_module(cells, upto=4)
    assert whole.text.startswith(upto.text)
    assert [b.cell for b in upto.blocks] == [1, 2, 4]


def test_digest_follows_code_cells_only() -> None:
    data = json.loads(notebook_json(CELLS))
    before = read_module(json.dumps(data)).digest()
    data["cells"][0]["source"] = ["# Another title"]  # markdown
    data["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hello"]}]
    data["metadata"]["widgets"] = {"state": {}}
    assert read_module(json.dumps(data)).digest() == before
    data["cells"][7]["source"] = ["y = 2"]
    after = read_module(json.dumps(data))
    assert after.digest() != before and after.digest() == source_digest(after.text)


def test_crlf_cells_are_normalised() -> None:
    module = read_module(notebook_json([("code", "a = 1\r\nb = 2\r\n")]))
    assert module.text == "a = 1\nb = 2\n"


@pytest.mark.parametrize(
    "text,words",
    [
        ("{not json", "not valid notebook JSON"),
        ("[1, 2]", "not an object"),
        ('{"worksheets": [], "nbformat": 3}', "nbformat 4"),
        ('{"cells": [{"cell_type": "code", "source": 3}]}', "cell 0"),
        ('{"cells": [], "metadata": {"kernelspec": {"language": "R"}}}', "kernel language is R"),
        ("[" * 100_000 + "]" * 100_000, "its JSON nests too deep"),  # a RecursionError before issue 25
        ('{"cells": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}", "its JSON nests too deep"),
    ],
)
def test_what_is_not_a_python_notebook_says_why(text: str, words: str) -> None:
    with pytest.raises(NotebookError, match=words):
        parse_cells(text)


def one_document(sources: list[str]) -> list[str]:
    """Code cells as jupyterlab-lsp shows a notebook: joined by two blank lines, magics rewritten."""
    blocks = []
    for source in sources:
        lines = [f'get_ipython().run_line_magic("{x[1:]}")' if x.startswith("%") else x for x in source.split("\n")]
        blocks.append("\n".join(lines) + "\n")
    return "\n\n".join(blocks).split("\n")


def code(cells: list[Cell]) -> list[str]:
    return [c.source for c in cells if c.kind == "code"]


def test_cells_shown_unchanged_keep_their_saved_text() -> None:
    cells = parse_cells(notebook_json(CELLS))
    shown = cells_shown(cells, one_document(code(cells)))
    assert shown == cells  # the magic the client rewrote is still the saved line


@pytest.mark.parametrize(
    "edit",
    [
        {4: "WIDE = 2\n\nclass MLP:\n    def __call__(self, x):\n        return x * 2\n"},  # lines added
        {2: "z = 3"},  # an empty cell typed into
        {7: "y = 2\nw = y"},  # the last cell
        {6: "def fixed():\n    pass", 7: "y = 1\nv = 0"},  # two cells side by side
        {1: "import jax"},  # the first cell, its magic deleted
    ],
)
def test_cells_shown_take_the_edited_cells_text(edit: dict[int, str]) -> None:
    cells = parse_cells(notebook_json(CELLS))
    edited = [Cell(c.index, c.kind, edit.get(c.index, c.source)) for c in cells]
    shown = cells_shown(cells, one_document(code(edited)))
    assert shown is not None
    assert [(c.index, c.kind) for c in shown] == [(c.index, c.kind) for c in cells]
    assert [c.source.rstrip("\n") for c in shown] == [c.source.rstrip("\n") for c in edited]


def test_cells_shown_refuse_what_is_not_the_notebooks_cells() -> None:
    cells = parse_cells(notebook_json(CELLS))
    sources = code(cells)
    inserted = [*sources[:3], "x = 1", *sources[3:]]  # a cell the saved notebook does not have
    assert cells_shown(cells, one_document(inserted)) is None
    # two cells edited side by side, one of them with two blank lines of its own: no even split
    two = [*sources[:3], "def f():\n    pass\n\n\ndef g():\n    pass", "y = 2"]
    assert cells_shown(cells, one_document(two)) is None
