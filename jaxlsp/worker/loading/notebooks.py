"""A notebook target's module: its code cells up to and including the target's cell (stdlib only).

The cells are compiled one by one under the notebook's path with module line numbers
(:mod:`jaxlsp.notebook`), and that module text is put in :mod:`linecache`, so tracebacks, JAX's
source frames and column conversions all read the right line, and ``Workspace.place`` turns a
position back into (cell, line). Two ways to run them:

- ``definitions`` (the default for notebooks): every cell up to the target's, reduced to imports,
  definitions and call-free assignments, as ``load = "definitions"`` does for a file;
- ``cells``: the cells above the target's run whole, in order, as a user would run them (IPython
  lines were neutralised: they are listed, not run); the target's own cell as definitions, so a
  training loop below the class in the same cell does not run.

A cell above the target's that does not parse is skipped and listed; the target's own cell must
parse.
"""

from __future__ import annotations

import ast
import linecache
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from jaxlsp.notebook import Module, NotebookError, build_module, parse_cells
from jaxlsp.worker.core.failures import CaptureError, Workspace

MAX_LISTED = 8  # skipped lines named in a note; the rest are counted


@dataclass
class NotebookRun:
    """What running a notebook's cells left: the notes for the graph's coverage, the names a
    definitions run left unset (by module line), the notebook's source digest."""

    cell: int
    notes: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    digest: str = ""


def target_cell(cells: Module, trees: dict[int, ast.Module], name: str) -> int | None:
    """The last code cell that binds the target's top-level name (``Outer`` of ``Outer.Inner``)."""
    top = name.split(".", 1)[0]
    found = None
    for block in cells.blocks:
        tree = trees.get(block.cell)
        if tree is not None and any(top in _bound(stmt) for stmt in tree.body):
            found = block.cell
    return found


def _bound(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return {stmt.name}
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).partition(".")[0] for a in stmt.names}
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def open_notebook(path: str, workspace: Workspace, kind: Literal["import", "example"]) -> tuple[Module, list[str]]:
    """The notebook's code cells as one module, and its lines, registered where frames,
    tracebacks and the graph's source lines look (linecache, by module line) and where
    ``Workspace`` maps module lines to cells; an unreadable notebook is a ``kind`` CaptureError."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            everything = build_module(parse_cells(f.read()))
    except (OSError, NotebookError) as exc:
        raise CaptureError(kind, f"cannot read the notebook {path}: {exc}") from None
    lines = everything.text.split("\n")
    linecache.cache[path] = (len(everything.text), None, [line + "\n" for line in lines], path)
    workspace.add_notebook(path, everything)
    return everything, lines


def run_notebook(
    path: str,
    namespace: dict[str, object],
    *,
    mode: str,
    name: str,
    cell: int | None,
    workspace: Workspace,
    definitions: Callable[[list[ast.stmt], str, dict[str, object]], dict[str, int]],
    reduce: Callable[[list[ast.stmt]], list[ast.stmt]],
    unset: Callable[[ast.stmt], list[str]],
) -> NotebookRun:
    """Run the notebook at ``path`` into ``namespace``; ``definitions``, ``reduce`` and ``unset``
    are the file loader's (run kept statements, keep definitions, names a statement sets)."""
    everything, lines = open_notebook(path, workspace, "import")
    trees: dict[int, ast.Module] = {}
    broken: dict[int, SyntaxError] = {}
    for block in everything.blocks:
        source = "\n".join(lines[block.start : block.end + 1]) + "\n"
        try:
            tree = ast.parse(source, filename=path)
        except SyntaxError as exc:
            if exc.lineno is not None:
                exc.lineno += block.start
                exc.end_lineno = exc.end_lineno + block.start if exc.end_lineno is not None else None
            broken[block.cell] = exc
            continue
        ast.increment_lineno(tree, block.start)
        trees[block.cell] = tree
    chosen = cell if cell is not None else target_cell(everything, trees, name)
    if chosen is None:  # nothing binds the name: run everything; resolving the target says so
        chosen = everything.blocks[-1].cell if everything.blocks else 0
    if everything.block(chosen) is None:
        raise CaptureError("refused", f"cell {chosen} of {os.path.basename(path)} is not a code cell")
    if chosen in broken:
        raise broken[chosen]
    run = NotebookRun(chosen, digest=everything.digest())
    for block in everything.blocks:
        if block.cell > chosen:
            break
        if block.cell in broken:
            run.notes.append(f"cell {block.cell} was skipped: it does not parse ({broken[block.cell].msg})")
            continue
        body = trees[block.cell].body
        if mode == "cells" and block.cell < chosen:
            exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec", dont_inherit=True), namespace)
            continue
        kept = reduce(body)
        kept_ids = {id(stmt) for stmt in kept}
        for stmt in body:
            if id(stmt) not in kept_ids:
                for target in unset(stmt):
                    run.skipped.setdefault(target, stmt.lineno)
        run.skipped.update(definitions(kept, path, namespace))
    ipython = [(c, n) for c, n in everything.neutralised if c <= chosen]
    if ipython:
        shown = "; ".join(f"cell {c} line {n.line + 1}: {n.text.strip()[:60]}" for c, n in ipython[:MAX_LISTED])
        more = f" and {len(ipython) - MAX_LISTED} more" if len(ipython) > MAX_LISTED else ""
        run.notes.append(f"IPython lines not run (magics, shell escapes, help): {shown}{more}")
    return run
