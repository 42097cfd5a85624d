"""A Jupyter notebook's code cells as one Python module, and positions mapped both ways (stdlib only).

The module text is the code cells in order, each cell's lines as they are (IPython-only lines
neutralised by :mod:`jaxlsp.notebook.magics`), joined with one newline: cell ``c``'s line ``l`` is
module line ``block.start + l``. Markdown and raw cells contribute nothing, but keep their place
in the numbering: a cell's index is its index in the notebook's ``cells`` array (nbformat 4), the
same index an LSP client's ``NotebookDocument.cells`` has.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jaxlsp.notebook.magics import Neutralised, neutralise

SUFFIX = ".ipynb"
#: A larger .ipynb is not read. Notebooks carry their outputs (images as base64), so the cap is
#: above a .py file's; the code cells together still meet the .py cap where text is summarised.
MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024
_NON_PYTHON = "its kernel language is {language}, not Python"


class NotebookError(ValueError):
    """Why a notebook's text is not a notebook jaxlsp can read (the message says it in words)."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell: ``index`` in the notebook's cells, ``kind`` (``code``, ``markdown``, ``raw``)."""

    index: int
    kind: str
    source: str


@dataclass(frozen=True, slots=True)
class Block:
    """Where code cell ``cell`` lies in the module text: lines ``start`` .. ``start + lines - 1``."""

    cell: int
    start: int
    lines: int

    @property
    def end(self) -> int:
        return self.start + self.lines - 1


@dataclass(frozen=True)
class Module:
    """The code cells (up to some cell) as one module text, and where each cell lies in it."""

    text: str
    blocks: tuple[Block, ...]
    neutralised: tuple[tuple[int, Neutralised], ...] = ()  # (cell, line within the cell)
    _starts: list[int] = field(default_factory=list, repr=False, compare=False)
    _by_cell: dict[int, Block] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._starts.extend(b.start for b in self.blocks)
        for b in self.blocks:  # by cell index: a 10,000-cell notebook looked each up in a scan
            self._by_cell.setdefault(b.cell, b)

    def locate(self, line: int) -> tuple[int, int] | None:
        """Module line (0-based) to (cell index, 0-based line within the cell)."""
        i = bisect.bisect_right(self._starts, line) - 1
        if i < 0:
            return None
        block = self.blocks[i]
        return (block.cell, line - block.start) if line <= block.end else None

    def block(self, cell: int) -> Block | None:
        return self._by_cell.get(cell)

    @cached_property
    def lines(self) -> list[str]:
        """The module text's lines (split once: a notebook's items each need their cell's)."""
        return self.text.split("\n")

    def module_line(self, cell: int, line: int) -> int | None:
        """(cell index, 0-based line within it) to the module's 0-based line; None outside code."""
        block = self.block(cell)
        if block is None or not 0 <= line < block.lines:
            return None
        return block.start + line

    def digest(self) -> str:
        """What a graph's ``sources`` holds for a notebook: the sha256 of the code cells' text."""
        return source_digest(self.text)


def source_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_cells(text: str) -> list[Cell]:
    """The cells of an nbformat 4 notebook's JSON text; raises :class:`NotebookError`."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NotebookError(f"it is not valid notebook JSON: {exc}") from None
    except RecursionError:  # json's decoder gives up past about 1,000 levels (issue 25: 100,000 deep)
        raise NotebookError("it is not a notebook jaxlsp can read: its JSON nests too deep") from None
    if not isinstance(data, dict):
        raise NotebookError("it is not a notebook: the JSON is not an object")
    if "worksheets" in data or not isinstance(data.get("cells"), list):
        raise NotebookError("it is not an nbformat 4 notebook (no top-level cells list)")
    language = _language(data.get("metadata"))
    if language is not None and language.lower() != "python":
        raise NotebookError(_NON_PYTHON.format(language=language))
    cells: list[Cell] = []
    for i, raw in enumerate(data["cells"]):
        if not isinstance(raw, dict):
            raise NotebookError(f"cell {i} is not an object")
        kind = raw.get("cell_type")
        source = raw.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(kind, str) or not isinstance(source, str):
            raise NotebookError(f"cell {i} has no cell_type or source text")
        cells.append(Cell(i, kind, source))
    return cells


def _language(metadata: Any) -> str | None:
    if not isinstance(metadata, dict):
        return None
    for section, key in (("kernelspec", "language"), ("language_info", "name")):
        table = metadata.get(section)
        value = table.get(key) if isinstance(table, dict) else None
        if isinstance(value, str) and value:
            return value
    return None


def build_module(cells: Iterable[Cell], upto: int | None = None) -> Module:
    """The module of the code cells (those with index <= ``upto`` when given)."""
    parts: list[str] = []
    blocks: list[Block] = []
    neutralised: list[tuple[int, Neutralised]] = []
    line = 0
    for cell in cells:
        if cell.kind != "code" or (upto is not None and cell.index > upto):
            continue
        source = cell.source.replace("\r\n", "\n").replace("\r", "\n") if "\r" in cell.source else cell.source
        source, found = neutralise(source)
        neutralised.extend((cell.index, n) for n in found)
        count = source.count("\n") + 1
        blocks.append(Block(cell.index, line, count))
        parts.append(source)
        line += count
    return Module("\n".join(parts), tuple(blocks), tuple(neutralised))


def read_module(text: str, upto: int | None = None) -> Module:
    """:func:`build_module` of a notebook's JSON text; raises :class:`NotebookError`."""
    return build_module(parse_cells(text), upto)


def is_notebook(path: object) -> bool:
    return str(path).endswith(SUFFIX)


def find_blocks(cells: Module, lines: Sequence[str], gap: int = 2) -> dict[int, int]:
    """Where each code cell of ``cells`` starts in ``lines``: a notebook shown as one text document,
    its code cells joined by ``gap`` blank lines (jupyterlab-lsp's virtual document). Only cells
    whose lines are found there, in order, are placed. Lines that IPython syntax took are not
    compared (clients rewrite magics their own way), nor is the last line of a cell magic's cell."""
    text = cells.text.split("\n")
    ignored = {cells.module_line(cell, n.line) for cell, n in cells.neutralised}
    magic = {cell for cell, n in cells.neutralised if n.line == 0 and n.text.lstrip().startswith("%%")}
    ignored |= {b.end for b in cells.blocks if b.cell in magic}

    def fits(block: Block, start: int) -> bool:
        if start + block.lines > len(lines):
            return False
        return all(
            m in ignored or lines[start + k].rstrip() == text[m].rstrip()
            for k, m in enumerate(range(block.start, block.end + 1))
        )

    found: dict[int, int] = {}
    at = 0
    for block in cells.blocks:
        start = next((s for s in range(at, len(lines) - block.lines + 1) if fits(block, s)), None)
        if start is not None:
            found[block.cell] = start
            at = start + block.lines + gap
    return found


def cells_shown(cells: Sequence[Cell], lines: Sequence[str], gap: int = 2) -> list[Cell] | None:
    """The notebook's ``cells`` (as on disk) with each code cell's text as a one-document client
    shows it now, unsaved edits included (jupyterlab-lsp's virtual document: the code cells joined
    by ``gap`` blank lines). Code cells found unchanged (:func:`find_blocks`) keep their text; the
    lines between two of them are the code cell between them, or the cells between them when that
    many gaps split those lines. None when the document cannot be read that way (a cell inserted
    between two unchanged ones, or several cells edited whose lines do not split evenly): the
    caller keeps the disk's cells."""
    # A blank cell matches any blank line (a gap's): it is placed by its neighbours instead.
    anchors = [c if c.kind != "code" or c.source.strip() else Cell(c.index, "raw", c.source) for c in cells]
    module = build_module(anchors)
    found = find_blocks(module, lines, gap)
    shown = {c.index: c for c in cells}
    run: list[Cell] = []  # code cells not found since the last found one
    at = 0  # the first document line after the last found cell and its gap

    def place(end: int) -> bool:
        region = list(lines[at : max(at, end)])
        if not run:
            return not any(line.strip() for line in region)  # text in no cell: a cell was inserted
        # a saved blank cell at either end of several that still reads as one blank line and a gap
        blank = [""] * (gap + 1)
        while len(run) > 1 and not run[0].source.strip() and region[: gap + 1] == blank:
            shown[run[0].index] = run[0]
            run.pop(0)
            region = region[gap + 1 :]
        while len(run) > 1 and not run[-1].source.strip() and region[-gap - 1 :] == blank:
            shown[run[-1].index] = run[-1]
            run.pop()
            region = region[: -gap - 1]
        parts = _split(region, gap, len(run))
        if parts is None:
            return False
        for cell, part in zip(run, parts, strict=True):
            shown[cell.index] = Cell(cell.index, cell.kind, "\n".join(part))
        run.clear()
        return True

    for cell in cells:
        if cell.kind != "code":
            continue
        start = found.get(cell.index)
        block = module.block(cell.index)
        size = block.lines if block is not None else 1
        # found with a gap on both sides, or it is an edited cell that starts or ends as it did
        framed = start is not None and all(
            not line.strip()
            for line in [*lines[max(0, start - gap) : start], *lines[start + size : start + size + gap]]
        )
        if start is None or not framed:
            run.append(cell)
            continue
        if not place(start - gap):
            return None
        at = start + size + gap
    end = len(lines)
    while run and end > at and not lines[end - 1].strip():
        end -= 1  # the document's trailing newline is no line of its last cell
    if not place(max(end, at)):
        return None
    return [shown[c.index] for c in cells]


def _split(region: list[str], gap: int, count: int) -> list[list[str]] | None:
    """``region`` as ``count`` cells separated by exactly ``gap`` blank lines; None when it is not."""
    if count == 1:
        return [region]
    parts: list[list[str]] = [[]]
    blank = 0
    for line in region:
        if not line.strip():
            blank += 1
            continue
        if blank >= gap and parts[-1]:  # more blank lines than the gap: the earlier cell's own
            parts[-1].extend([""] * (blank - gap))
            parts.append([])
        elif blank:
            parts[-1].extend([""] * blank)
        blank = 0
        parts[-1].append(line)
    return parts if len(parts) == count and blank == 0 else None
