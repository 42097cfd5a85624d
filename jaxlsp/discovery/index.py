"""The workspace index: one summary per Python file or notebook, rebuilt only for statements that changed.

Summaries come from open documents first, then from disk. Statements are summarized once per
distinct text (a bounded cache shared by all files), so an edit re-summarizes only the top-level
statements it touched. ``generation`` moves whenever a file's exported names or class headers
change, which is what invalidates cross-file resolution.

A notebook (``.ipynb``) is summarised as its module (:mod:`jaxlsp.notebook`: the code cells in
order, IPython lines neutralised), one cell at a time, so a cell that never closes a bracket
cannot swallow the next one; :meth:`WorkspaceIndex.cells` maps its lines back to cells.
"""

from __future__ import annotations

import hashlib
import os
import re
from array import array
from collections import OrderedDict
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jaxlsp.discovery import budget
from jaxlsp.discovery.budget import Refusal
from jaxlsp.discovery.chunks import Statement, normalize_newlines, ticking_logical_lines, ticking_statements
from jaxlsp.discovery.modules import ModuleMap
from jaxlsp.discovery.steps import run_through
from jaxlsp.discovery.summary import Binding, ChunkInfo, ClassInfo, FunctionInfo, summarize
from jaxlsp.notebook import (
    MAX_NOTEBOOK_BYTES,
    Cell,
    Module,
    NotebookError,
    build_module,
    is_notebook,
    parse_cells,
)
from jaxlsp.textfiles import Unreadable, read_text, real_path

SOURCE_SUFFIXES = (".py", ".ipynb")  # what discovery reads: Python files and Jupyter notebooks
SKIP_DIRS = frozenset({".venv", "venv", "node_modules", "build", "dist", "__pycache__", "site-packages"})
# A file that matches none of this cannot define a module class or a JAX function on its own
# (a subclass of a workspace base still has a ``class`` line). ``__init__.py`` files always count:
# they re-export.
_MAY_MATTER = re.compile(r"jax|flax|equinox|optax|\bnnx\b|\beqx\b|^[ \t]*class\s", re.M)
_CACHE_SIZE = 50_000
TICK = 2_000  # tokens scanned between two chances for a caller in slices to pause (about 2 ms)
LINKS_OUT = "it is a link to a file outside the workspace"


@dataclass
class FileSummary:
    path: Path
    module: str
    digest: str
    line_lengths: array[int]  # code points per line: ranges end there; the text itself is not kept
    chunks: list[tuple[int, ChunkInfo]]  # (first line, 0-based; summary)
    bindings: dict[str, list[Binding]] = field(default_factory=dict)  # by name, in line order
    stars: list[Binding] = field(default_factory=list)
    classes: dict[str, tuple[int, ClassInfo]] = field(default_factory=dict)
    exports: int = 0  # a hash of everything other files can see
    skipped: list[Refusal] = field(default_factory=list)  # statements not parsed, absolute lines

    def binding(self, name: str, before: int | None = None) -> Binding | None:
        candidates = self.candidates(name, before)
        return candidates[0] if candidates else None

    def candidates(self, name: str, before: int | None = None) -> list[Binding]:
        """Bindings of ``name``, latest first: those before line ``before`` when there are any.

        Callers try them in order, because ``try: import flax.linen as nn`` / ``except: nn = None``
        binds the same name twice and the import is the one that matters.
        """
        found = self.bindings.get(name)
        if not found:
            return []
        if before is not None:
            earlier = [b for b in found if b.line < before]
            if earlier:
                return earlier[::-1]
        return found[::-1]

    def line_length(self, line: int) -> int:
        return self.line_lengths[line] if 0 <= line < len(self.line_lengths) else 0

    def functions(self) -> Iterator[tuple[int, FunctionInfo]]:
        """Module-level functions: top-level ``def``s and those inside if/else, try or with blocks."""
        for start, info in self.chunks:
            if info.fn is not None:
                yield start, info.fn
            for _, nested in info.defs:
                yield start, nested


class ChunkCache:
    """Statement summaries by (kind word, header offset, text hash), least recently used evicted.

    Keys hold a hash, not the text, so a statement's source is kept only where a summary needs it
    later (function and class statements, for their lazily parsed details).
    """

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, int, int, int], ChunkInfo] = OrderedDict()
        self.misses = 0

    def get(self, text: str, word: str, header: int) -> ChunkInfo:
        key = (word, header, len(text), hash(text))
        info = self._items.get(key)
        if info is not None:
            self._items.move_to_end(key)
            return info
        self.misses += 1
        info = summarize(text, word, header)
        self._items[key] = info
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return info


def may_matter(path: Path, text: str) -> bool:
    return path.name == "__init__.py" or _MAY_MATTER.search(text) is not None


def summarize_file(path: Path, module: str, text: str, cache: ChunkCache, cells: Module | None = None) -> FileSummary:
    """The file's summary; statements over discovery/budget.py's bounds are listed, not parsed.
    With ``cells`` (a notebook's module), statements are found cell by cell."""
    return run_through(summarize_steps(path, module, text, cache, cells))


def summarize_steps(
    path: Path, module: str, text: str, cache: ChunkCache, cells: Module | None = None
) -> Generator[None, None, FileSummary]:
    """:func:`summarize_file`, yielding between statements so that a caller (the server's
    background index) can answer requests while a large file is parsed."""
    text = normalize_newlines(text)
    lines = text.split("\n")
    chunks: list[tuple[int, ChunkInfo]] = []
    skipped: list[Refusal] = []
    spent = 0
    if len(text) > budget.MAX_FILE_BYTES:  # an open document: files on disk are capped when read
        skipped.append(Refusal(0, budget.TOO_LARGE, whole_file=True))
        lines = [""]
    for offset, st in _statements(text, lines, cells) if not skipped else ():
        if st is None:  # inside a long statement (100,000 decorator lines are one)
            yield
            continue
        start, end = offset + st.start, offset + st.end
        if len(chunks) == budget.MAX_STATEMENTS:
            skipped.append(Refusal(start, budget.TOO_MANY))
            break
        chunk = "\n".join(lines[start : end + 1]) + "\n"
        info = cache.get(chunk, st.word, st.header - st.start)
        spent += info.cost
        if info.cost and spent > budget.FILE_BUDGET:
            info = ChunkInfo("skipped", skipped=Refusal(0, budget.SPENT))
        if info.skipped is not None:
            skipped.append(Refusal(start + info.skipped.line, info.skipped.reason))
        chunks.append((start, info))
        yield
    lengths = array("L", map(len, lines))
    fs = FileSummary(path, module, hashlib.sha1(text.encode()).hexdigest(), lengths, chunks, skipped=skipped)
    exported: list[object] = []
    for start, info in chunks:
        for b in info.bindings:
            b = Binding(b.name, b.line + start, b.how, b.target, b.level)
            if b.how == "star":
                fs.stars.append(b)
            else:
                fs.bindings.setdefault(b.name, []).append(b)
            exported.append((b.name, b.how, b.target, b.level))
        if info.cls is not None:
            line = start + info.cls.header
            fs.bindings.setdefault(info.cls.name, []).append(Binding(info.cls.name, line, "local", "class"))
            fs.classes[info.cls.name] = (start, info.cls)
            exported.append(_class_key(info.cls))
        if info.fn is not None:
            line = start + info.fn.header
            fs.bindings.setdefault(info.fn.name, []).append(Binding(info.fn.name, line, "local", "def"))
            exported.append(("def", info.fn.name))
        for offset, nested in info.defs:
            fs.bindings.setdefault(nested.name, []).append(Binding(nested.name, start + offset, "local", "def"))
            exported.append(("def", nested.name))
    fs.exports = hash((module, tuple(exported)))
    return fs


def _statements(text: str, lines: list[str], cells: Module | None) -> Iterator[tuple[int, Statement | None]]:
    """Top-level statements with the line their text starts at: the whole text's, or each
    notebook cell's on its own (a statement never runs from one cell into the next); ``None``
    every :data:`TICK` tokens scanned, so that the caller can pause inside a long statement."""
    if cells is None:
        for st in ticking_statements(ticking_logical_lines(text, TICK)):
            yield 0, st
        return
    for block in cells.blocks:
        for st in ticking_statements(ticking_logical_lines("\n".join(lines[block.start : block.end + 1]), TICK)):
            yield block.start, st


def _stamp_of(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _class_key(cls: ClassInfo) -> object:
    return ("class", cls.name, cls.bases, tuple(_class_key(c) for c in cls.nested))


def iter_python_files(root: Path) -> Iterator[Path]:
    """Python files and notebooks under ``root`` (or ``root`` itself), skipping virtualenvs, builds
    and hidden folders (Jupyter's ``.ipynb_checkpoints`` among them)."""
    if root.is_file():
        if root.suffix in SOURCE_SUFFIXES:
            yield root
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield Path(folder, name)


class WorkspaceIndex:
    """Summaries of the workspace's Python files and notebooks, from open documents or disk."""

    def __init__(self, roots: list[Path]) -> None:
        self.modules = ModuleMap(roots, exists=self._exists)
        self.cache = ChunkCache()
        self.generation = 0
        self._open: dict[Path, str] = {}
        self._files: dict[Path, FileSummary | None] = {}
        self._stamps: dict[Path, tuple[int, int]] = {}
        self._notebooks: dict[Path, Module] = {}  # each notebook's module (open or from disk)
        self._notebook_stamps: dict[Path, tuple[int, int]] = {}  # the disk version each one was read from
        self.unread: dict[Path, str] = {}  # files found but not read, and why
        self._saved_cells: dict[Path, tuple[tuple[int, int], list[Cell]]] = {}  # disk_cells, by version
        self._stale: set[Path] = set()  # open documents whose text is newer than their summary

    @property
    def roots(self) -> list[Path]:
        return self.modules.roots

    def _exists(self, path: Path) -> bool:
        return path in self._open or path.is_file()

    # -- updates -------------------------------------------------------------------------------
    def set_text(self, path: Path, text: str) -> bool:
        """Use ``text`` for ``path`` (an open document). True when other files may see a change."""
        new_file = self.put_text(path, text)
        return bool(run_through(self.refresh_steps(path))) or new_file

    def put_text(self, path: Path, text: str) -> bool:
        """Use ``text`` for ``path`` (an open document) without summarising it yet: the server
        runs :meth:`refresh_steps` in slices, and :meth:`summary` catches up if asked first. True
        when the file is new (other files may see a change)."""
        path = real_path(path)
        new_file = path not in self._open and not path.is_file()
        self._open[path] = text
        self._stale.add(path)
        if new_file:
            self.modules.invalidate()
            self.generation += 1
        return new_file

    def is_stale(self, path: Path) -> bool:
        """The open document's text is newer than its summary."""
        return real_path(path) in self._stale

    def refresh_steps(self, path: Path) -> Generator[None, None, bool]:
        """Summarise an open document's latest text, yielding between statements. True when other
        files may see a change. Text put meanwhile leaves it stale for the next call."""
        path = real_path(path)
        text = self._open.get(path)
        if text is None or path not in self._stale:
            return False
        changed = yield from self._refresh_steps(path, text)
        if self._open.get(path) is text:
            self._stale.discard(path)
        return changed

    def set_notebook(self, path: Path, cells: Module) -> bool:
        """Use ``cells`` (an open notebook's module, built from the client's cells) for ``path``."""
        self._notebooks[real_path(path)] = cells
        self._notebook_stamps.pop(real_path(path), None)  # the module is the client's now, not the disk's
        return self.set_text(path, cells.text)

    def put_notebook(self, path: Path, cells: Module) -> bool:
        """:meth:`set_notebook` summarised later, as :meth:`put_text` (True when the file is new)."""
        self._notebooks[path.resolve()] = cells
        self._notebook_stamps.pop(path.resolve(), None)
        return self.put_text(path, cells.text)

    def close(self, path: Path) -> bool:
        path = real_path(path)
        self._stale.discard(path)
        if self._open.pop(path, None) is None:
            return False
        return self.file_changed(path)

    def file_changed(self, path: Path) -> bool:
        """The file changed, appeared or vanished on disk. True when other files may see a change."""
        return bool(run_through(self.file_changed_steps(path)))

    def file_changed_steps(self, path: Path) -> Generator[None, None, bool]:
        """:meth:`file_changed`, yielding between statements (the server's watched-files handler)."""
        path = real_path(path)
        if path in self._open:
            return False
        existed = path in self._stamps or self._files.get(path) is not None
        text = self._read(path)
        if text is None:
            self._files.pop(path, None)
            self._stamps.pop(path, None)
            self.modules.invalidate()
            self.generation += 1
            return True
        if not existed:
            self.modules.invalidate()
            self.generation += 1
        changed = yield from self._refresh_steps(path, text)
        self._stamp(path)
        return changed or not existed

    def revalidate(self) -> bool:
        """Re-stat every file read from disk and re-read those that changed or vanished.

        For clients that cannot watch files: a few hundred ``stat`` calls cost about a
        millisecond. True when other files may see a change.
        """
        changed = False
        for path, stamp in list(self._stamps.items()):
            try:
                st = path.stat()
                now: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
            except OSError:
                now = None
            if now != stamp:
                changed = self.file_changed(path) or changed
        return changed

    def _refresh_steps(self, path: Path, text: str) -> Generator[None, None, bool]:
        old = self._files.get(path)
        cells = self._notebooks.get(path) if is_notebook(path) else None
        fs = yield from summarize_steps(path, self.modules.module_name(path), text, self.cache, cells)
        self.unread.pop(path, None)
        self._files[path] = fs
        if old is not None and old.exports != fs.exports:
            self.generation += 1
            return True
        return False

    def _stamp(self, path: Path) -> None:
        try:
            st = path.stat()
            self._stamps[path] = (st.st_mtime_ns, st.st_size)
        except OSError:
            self._stamps.pop(path, None)

    # -- queries -------------------------------------------------------------------------------
    def summary(self, path: Path) -> FileSummary | None:
        return run_through(self.summary_steps(path))

    def summary_steps(self, path: Path) -> Generator[None, None, FileSummary | None]:
        """:meth:`summary`, yielding between statements when the file must be (re)summarised."""
        if self._links_out(path):
            return None
        path = real_path(path)
        if path in self._open:
            if path in self._stale or path not in self._files:
                self._stale.add(path)
                yield from self.refresh_steps(path)
            return self._files.get(path)
        stamp = self._stamps.get(path)
        try:
            st = path.stat()
        except OSError:
            return None
        if stamp == (st.st_mtime_ns, st.st_size) and path in self._files:
            return self._files[path]
        text = self._read(path)
        if text is None:
            return None
        yield from self._refresh_steps(path, text)
        self._stamps[path] = (st.st_mtime_ns, st.st_size)
        return self._files.get(path)

    def open_paths(self) -> frozenset[Path]:
        """The open documents' paths (resolved): their text comes from the editor, not the disk."""
        return frozenset(self._open)

    def text(self, path: Path) -> str | None:
        """A file's text: for a notebook, its module (the code cells' text, what a graph's
        ``sources`` hashes)."""
        if self._links_out(path):
            return None
        path = real_path(path)
        return self._open.get(path) if path in self._open else self._read(path)

    def cells(self, path: Path) -> Module | None:
        """A notebook's module as the index last read it (the lines of :meth:`summary` and
        :meth:`text`, mapped to cells); None for any other file."""
        if not is_notebook(path) or self._links_out(path):
            return None
        self.summary(path)  # re-reads a notebook that changed on disk (a stat when it did not)
        return self._notebooks.get(real_path(path))

    def disk_cells(self, path: Path) -> list[Cell] | None:
        """A notebook's cells as saved on disk (every kind, as written), whatever the client has
        open; read once per version on disk. None when it cannot be read as a notebook."""
        if not is_notebook(path) or self._links_out(path):
            return None
        path = real_path(path)
        stamp = _stamp_of(path)
        kept = self._saved_cells.get(path)
        if stamp is not None and kept is not None and kept[0] == stamp:
            return kept[1]
        text = read_text(path, MAX_NOTEBOOK_BYTES)
        if isinstance(text, Unreadable):
            return None
        try:
            cells = parse_cells(text)
        except NotebookError:
            return None
        self._saved_cells.pop(path, None)
        if stamp is not None:
            self._saved_cells[path] = (stamp, cells)
        return cells

    def skips(self, path: Path) -> list[Refusal]:
        """What discovery did not look at in ``path``: the whole file (line 0) or statements."""
        reason = self.unread.get(Path(os.path.abspath(path))) or self.unread.get(real_path(path))
        if reason is not None:
            return [Refusal(0, reason, whole_file=True)]
        fs = self._files.get(real_path(path))
        return list(fs.skipped) if fs is not None else []

    def _links_out(self, path: Path) -> bool:
        """``path`` lies in the workspace but is a link to a file outside it (never read: a
        repository's ``notes.py -> ~/.ssh/id_rsa``). A file outside every root that the client
        names itself is read as named."""
        absolute = Path(os.path.abspath(path))
        if not any(absolute.is_relative_to(r) for r in self.roots):
            return False
        resolved = real_path(path)
        if any(resolved.is_relative_to(r) for r in self.roots):
            return False
        self.unread[absolute] = LINKS_OUT
        return True

    def scan(self, roots: list[Path] | None = None) -> Iterator[Path | None]:
        """Summarize every file under the roots that may matter. Yields each path when it is
        done, and None between statements of a file (a point where a caller may pause)."""
        for root in roots or self.roots:
            for found in iter_python_files(root):
                if self._links_out(found):
                    continue
                path = real_path(found)
                if path in self._open:
                    yield path
                    continue
                text = yield from self._read_steps(path)
                if text is None or not may_matter(path, text):
                    continue
                yield from self._refresh_steps(path, text)
                self._stamp(path)
                yield path

    def _read(self, path: Path) -> str | None:
        """A file's text from disk, or None; why it was not read is kept in ``unread``. A
        notebook's text is its module's (same reading rules, its own size cap)."""
        return run_through(self._read_steps(path))

    def _read_steps(self, path: Path) -> Generator[None, None, str | None]:
        """:meth:`_read`, pausing (None) between reading a notebook, parsing its JSON into cells and
        building its module: the 10,000-cell notebook's were one step of 40-85 ms of the event
        loop during indexing (loop watchdog, issue 25), each of them about a third of it."""
        notebook = is_notebook(path)
        if notebook:  # parsing a notebook's JSON (outputs and all) costs more than its code: once
            stamp = _stamp_of(path)
            if stamp is not None and self._notebook_stamps.get(path) == stamp and path in self._notebooks:
                return self._notebooks[path].text
        text = read_text(path, MAX_NOTEBOOK_BYTES if notebook else budget.MAX_FILE_BYTES)
        if notebook and not isinstance(text, Unreadable):
            yield
            try:
                parsed = parse_cells(text)
                yield
                cells = build_module(parsed)
            except NotebookError as exc:
                text = Unreadable(str(exc))
            else:
                self._notebooks[path] = cells
                if stamp is not None:
                    self._notebook_stamps[path] = stamp
                text = cells.text
        if isinstance(text, Unreadable):
            self.unread[path] = str(text)
            self._files.pop(path, None)
            if notebook:
                self._notebooks.pop(path, None)
                self._notebook_stamps.pop(path, None)
            return None
        self.unread.pop(path, None)
        return text

    def known_files(self) -> list[Path]:
        return [p for p, fs in self._files.items() if fs is not None]
