"""What a document URI shows, in the index's terms: a file, one cell of a notebook, or a whole
notebook as one text document.

Discovery and graphs speak of a notebook in module lines (the code cells joined,
:mod:`jaxlsp.notebook`) and of frames as (cell, line). Clients show a notebook two ways:

- LSP 3.17 notebook sync (VS Code): each cell is its own text document, with a URI of the
  client's own scheme (``vscode-notebook-cell:...``); :class:`OpenNotebooks` remembers which
  notebook and which cell each URI is, from ``notebookDocument/*``;
- one text document for the whole notebook (jupyterlab-lsp's virtual document, opened under the
  ``.ipynb`` file's URI): its code cells joined by blank lines, found by
  :func:`jaxlsp.notebook.find_blocks`.

A :class:`View` turns a document line into a module line and back, so each feature handles all
three the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jaxlsp.notebook import Module, find_blocks


@dataclass(frozen=True)
class CellRef:
    """A notebook cell the client opened: the notebook's file, the cell's index, its document URI."""

    path: Path
    cell: int
    uri: str


class OpenNotebooks:
    """The notebooks the client synchronises cell by cell (``notebookDocument/didOpen``)."""

    def __init__(self) -> None:
        self._cells: dict[str, CellRef] = {}
        self._notebooks: dict[Path, list[str]] = {}

    def update(self, path: Path, cell_uris: list[str]) -> None:
        """The notebook at ``path`` now has these cells (every kind, in order)."""
        self.remove(path)
        path = path.resolve()
        self._notebooks[path] = list(cell_uris)
        for index, uri in enumerate(cell_uris):
            self._cells[uri] = CellRef(path, index, uri)

    def remove(self, path: Path) -> None:
        for uri in self._notebooks.pop(path.resolve(), []):
            self._cells.pop(uri, None)

    def cell(self, uri: str) -> CellRef | None:
        return self._cells.get(uri)

    def uris(self, path: Path) -> list[str] | None:
        """The notebook's cell document URIs by cell index, when the client synchronises it."""
        found = self._notebooks.get(path.resolve())
        return list(found) if found is not None else None

    def cell_uri(self, path: Path, cell: int) -> str | None:
        uris = self._notebooks.get(path.resolve())
        return uris[cell] if uris is not None and 0 <= cell < len(uris) else None

    def is_open(self, path: Path) -> bool:
        return path.resolve() in self._notebooks


@dataclass
class View:
    """A document as the client shows it (``lines``) over the index's text of ``path``.

    ``cells`` is the notebook's module (None for a ``.py`` file); ``starts`` maps each code cell
    the document shows to its first document line (a cell document: its own cell at 0).
    """

    uri: str
    path: Path
    lines: list[str]
    cells: Module | None = None
    starts: dict[int, int] = field(default_factory=dict)
    cell: int | None = None  # a cell document's cell

    def to_module(self, line: int) -> int | None:
        """The module line shown at the document's ``line`` (0-based); None between cells."""
        if self.cells is None:
            return line
        for cell, start in self.starts.items():
            block = self.cells.block(cell)
            if block is not None and start <= line < start + block.lines:
                return block.start + line - start
        return None

    def from_module(self, line: int) -> int | None:
        """The document line that shows module ``line``; None when this document does not."""
        if self.cells is None:
            return line
        found = self.cells.locate(line)
        if found is None or found[0] not in self.starts:
            return None
        return self.starts[found[0]] + found[1]

    def frame_at(self, line: int) -> tuple[int | None, int] | None:
        """The document line as a frame would name it: (cell or None, 1-based line)."""
        module_line = self.to_module(line)
        if module_line is None:
            return None
        if self.cells is None:
            return None, module_line + 1
        found = self.cells.locate(module_line)
        return (found[0], found[1] + 1) if found is not None else None

    def frame_line(self, cell: int | None, line: int) -> int | None:
        """A frame's (cell, 1-based line) as a document line; None when this document does not show
        it. A cell document shows the frame's line whatever its index was (the caller chose the
        cell by its identity: cells inserted above since the trace do not move it)."""
        if self.cell is not None:
            return line - 1
        if self.cells is None:
            return line - 1 if cell is None else None
        if cell is None:
            return None
        module_line = self.cells.module_line(cell, line - 1)
        return self.from_module(module_line) if module_line is not None else None


def cell_view(ref: CellRef, cells: Module | None, text: str) -> View | None:
    """One cell document of a notebook the client synchronises."""
    if cells is None or cells.block(ref.cell) is None:
        return None
    return View(ref.uri, ref.path, text.split("\n"), cells, {ref.cell: 0}, ref.cell)


def notebook_view(uri: str, path: Path, cells: Module, text: str | None) -> View:
    """A whole notebook as one document: the client's text when it opened one (jupyterlab-lsp),
    else the module itself."""
    if text is None:
        return View(uri, path, cells.text.split("\n"), cells, {b.cell: b.start for b in cells.blocks})
    lines = text.replace("\r\n", "\n").split("\n")
    return View(uri, path, lines, cells, find_blocks(cells, lines))
