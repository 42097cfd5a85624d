"""The target's own import chain, and the modules a static call site's values would import beside it.

A live trace builds a static call site's arguments from its ``ref`` values (``{ref =
"test_blocks:Config"}``), and building one imports that module: a test module's top level (a
fixture download, a log line) would then run on every open. So a static site is for live use only
when each ``ref`` names a module that loading the target imports anyway (the target's file, the
workspace modules its top level imports, theirs, and the packages above them), or a module that is
not the workspace's (the standard library, an installed package). Read from the index's texts
with :mod:`ast` (module-level imports only: an import inside a function runs when it is called,
not on loading); nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxlsp.textfiles import real_path

if TYPE_CHECKING:
    from jaxlsp.discovery.callsites.sites import CallSite
    from jaxlsp.discovery.index import WorkspaceIndex

MAX_CHAIN = 2000  # workspace files followed: a chain this long is a whole monorepo, and its end is not read


def import_chain(index: WorkspaceIndex, path: Path) -> set[Path]:
    """The real paths of the workspace files loading ``path`` imports, ``path`` among them."""
    modules = index.modules
    start = real_path(path)
    seen: set[Path] = set()
    todo = [start, *_packages_above(index, start)]
    while todo and len(seen) < MAX_CHAIN:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        if file.suffix != ".py":
            continue  # a notebook's imports are its cells': its own refs only
        for name in _imported_names(index, file):
            found = modules.locate(name, file)
            if found is not None:
                found = real_path(found)
                todo += [found, *_packages_above(index, found)]
    return seen


def imports_of(index: WorkspaceIndex, path: Path) -> list[Path]:
    """The real paths of the workspace files that loading ``path`` imports directly (module-level
    imports, and the packages above each), for walks that count the steps (capture/inputs/importers.py)."""
    out: list[Path] = []
    for name in _imported_names(index, path):
        found = index.modules.locate(name, path)
        if found is not None:
            found = real_path(found)
            out += [found, *_packages_above(index, found)]
    return list(dict.fromkeys(out))


def packages_above(index: WorkspaceIndex, path: Path) -> list[Path]:
    """The ``__init__.py`` files Python runs before ``path`` as a package's module."""
    return _packages_above(index, path)


def foreign_refs(index: WorkspaceIndex, site: CallSite, target: Path, chain: set[Path]) -> list[str]:
    """The ``ref`` values of ``site`` (``module:Name``) whose module is a workspace file outside
    ``chain`` (:func:`import_chain` of ``target``), as the worker would find it: from the site's
    folder, which the trace's ``sys.path`` holds, or from the target's."""
    out: list[str] = []
    importers = [real_path(site.path), real_path(target)]
    for ref in _refs([site.init, site.inputs, site.extra]):
        module = ref.partition(":")[0]
        for importer in importers:
            found = index.modules.locate(module, importer)
            if found is not None and real_path(found) not in chain:
                out.append(ref)
                break
    return out


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key in ("ref", "factory"):
            if isinstance(value.get(key), str):
                yield value[key]
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _refs(item)


def _packages_above(index: WorkspaceIndex, path: Path) -> list[Path]:
    """The ``__init__.py`` files Python runs before ``path`` as a package's module."""
    parts, top = index.modules.package_parts(path)
    folder, out = top, []
    for part in parts:
        folder = folder / part
        out.append(folder / "__init__.py")
    return out


def _imported_names(index: WorkspaceIndex, path: Path) -> list[str]:
    """The absolute module names ``path``'s module-level statements import (``from a import b``
    gives ``a`` and ``a.b``: ``b`` may be a submodule)."""
    text = index.text(path)
    if text is None:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                names += [".".join(parts[: i + 1]) for i in range(len(parts))]
        elif isinstance(node, ast.ImportFrom):
            base = index.modules.absolute(path, node.module or "", node.level)
            if base:
                names.append(base)
            names += [f"{base}.{a.name}" if base else a.name for a in node.names if a.name != "*"]
    return names


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run when the module loads: into ``if``/``try``/``with`` blocks, not into
    functions or classes' methods (a class body runs, so its imports count)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.With | ast.AsyncWith | ast.For | ast.While | ast.ClassDef):
            yield from _top_level(stmt.body)
            yield from _top_level(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try):
            yield from _top_level(stmt.body)
            for handler in stmt.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(stmt.orelse)
            yield from _top_level(stmt.finalbody)
