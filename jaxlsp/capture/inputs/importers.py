"""Which of the workspace's examples reach a file through their imports, read statically (issue 56).

``jaxlsp learn FILE`` and ``jaxlsp.learnShapes`` on a file run only the examples whose module-level
imports, followed through the workspace (``discovery/callsites/importchain.py``: the way Python
would resolve them from the example's folder, the package root, pytest's ``pythonpath`` and
``src/``), reach the file's module: a test file is loaded after the ``conftest.py`` files of its
folders, so theirs count too. The nearest come first (fewest imports between the example and the
file). An example's own imports count wherever they are (a test file's run calls its tests), the
modules' only at their top level (an import inside a function runs when it is called). The same
walk names the workspace sources an example loads, whose hashes keep what it taught valid
(:mod:`.examplecache`). Nothing is imported or run: the files' texts are read with :mod:`ast`, each
file once.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from pathlib import Path

from jaxlsp.discovery.callsites.importchain import MAX_CHAIN, imports_of, packages_above
from jaxlsp.discovery.index import WorkspaceIndex
from jaxlsp.textfiles import real_path
from jaxlsp.worker.protocol import ExampleSpec

_WORD = re.compile(r"[A-Za-z_]\w*")
# re-exports followed from an example's import to the file that defines the name (nmn: tests import
# ``nmn.linen``, whose ``__init__`` imports ``nmn.linen.nmn``, which defines ``YatNMN``: 2 hops)
_REEXPORT_HOPS = 8


class ImportGraph:
    """The workspace files each example loads, with how many imports away each one is."""

    def __init__(self, root: Path, index: WorkspaceIndex | None = None) -> None:
        self.root = real_path(root)
        # a fresh index reads from disk, which is what an example's run imports (not an unsaved buffer)
        self.index = index or WorkspaceIndex([self.root])
        self._direct: dict[Path, list[Path]] = {}
        self._depths: dict[Path, dict[Path, int]] = {}
        self._first: dict[Path, list[Path]] = {}  # what an example loads first (its imports, its conftests)
        self._strict: dict[tuple[Path, bool], set[Path]] = {}
        self._names: dict[Path, set[str]] = {}
        self._trees: dict[Path, ast.Module] = {}
        self._words: dict[Path, set[str]] = {}

    def _imports(self, path: Path) -> list[Path]:
        found = self._direct.get(path)
        if found is None:
            found = self._direct[path] = imports_of(self.index, path) if path.suffix == ".py" else []
        return found

    def _run_imports(self, path: Path) -> list[Path]:
        """The workspace files an example's own imports load, those inside its functions too: a
        run of a test file calls every test (``def test_x(): from pkg import y``)."""
        text = self.index.text(path)
        try:
            tree = ast.parse(text or "")
        except (SyntaxError, ValueError):
            return []
        names: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = self.index.modules.absolute(path, node.module or "", node.level)
                names += [base] if base else []
                names += [f"{base}.{a.name}" if base else a.name for a in node.names if a.name != "*"]
        out: list[Path] = []
        for name in names:
            parts = name.split(".")
            for i in range(len(parts)):
                found = self.index.modules.locate(".".join(parts[: i + 1]), path)
                if found is not None:
                    out.append(real_path(found))
        return [*dict.fromkeys(out), *self._imports(path)]

    def _conftests(self, path: Path) -> list[Path]:
        """The ``conftest.py`` files pytest loads before the test file ``path``: from the root down."""
        out: list[Path] = []
        folder = path.parent
        while folder.is_relative_to(self.root):
            candidate = folder / "conftest.py"
            if candidate.is_file() and candidate != path:
                out.append(real_path(candidate))
            if folder == self.root:
                break
            folder = folder.parent
        return out[::-1]

    def depths(self, example: ExampleSpec) -> dict[Path, int]:
        """Every workspace file loading ``example`` imports, by the number of imports between them
        (the example's own file is 0)."""
        start = real_path(Path(str(example["path"])))
        known = self._depths.get(start)
        if known is not None:
            return known
        first = [*packages_above(self.index, start)]
        if example.get("kind") == "test":
            first += self._conftests(start)
        self._first[start] = [*first, *self._run_imports(start)]
        depth: dict[Path, int] = {start: 0}
        todo: deque[Path] = deque()
        for found in self._first[start]:
            if found not in depth:
                depth[found] = 1
                todo.append(found)
        while todo and len(depth) < MAX_CHAIN:
            file = todo.popleft()
            for found in self._imports(file):
                if found not in depth:
                    depth[found] = depth[file] + 1
                    todo.append(found)
        self._depths[start] = depth
        return depth

    def _without_reexports(self, start: Path, first: list[Path]) -> set[Path]:
        """The files loading ``start`` imports when a package's ``__init__.py`` is loaded but not
        followed: what a file imports by name, not what a package re-exports beside it."""
        seen = {start}
        todo = list(first)
        while todo and len(seen) < MAX_CHAIN:
            file = todo.pop()
            if file in seen:
                continue
            seen.add(file)
            if file.name != "__init__.py":
                todo += self._imports(file)
        return seen

    def _strictly(self, path: Path, example: bool) -> set[Path]:
        found = self._strict.get((path, example))
        if found is None:
            first = self._first.get(path, []) if example else self._imports(path)
            found = self._strict[(path, example)] = self._without_reexports(path, first)
        return found

    def _tree(self, path: Path) -> ast.Module:
        found = self._trees.get(path)
        if found is None:
            try:
                found = ast.parse(self.index.text(path) or "")
            except (SyntaxError, ValueError):
                found = ast.Module(body=[], type_ignores=[])
            self._trees[path] = found
        return found

    def _defined(self, path: Path) -> set[str]:
        """The names ``path`` defines at its top level (functions and classes)."""
        found = self._names.get(path)
        if found is None:
            kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            found = self._names[path] = {n.name for n in self._tree(path).body if isinstance(n, kinds)}
        return found

    def _origin(self, module: Path, name: str, hops: int = 0) -> Path | None:
        """The workspace file that defines ``name`` as ``module`` exports it: ``module`` itself, or
        the file a package's re-export (``from .nmn import YatNMN``) takes it from; None when
        it cannot be told statically (a submodule, a third-party name, a dynamic export)."""
        if name in self._defined(module):
            return module
        if hops >= _REEXPORT_HOPS:
            return None
        for node in ast.walk(self._tree(module)):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if (alias.asname or alias.name) != name and alias.name != "*":
                    continue
                base = self.index.modules.absolute(module, node.module or "", node.level)
                source = self.index.modules.locate(base, module) if base else None
                origin = (
                    self._origin(real_path(source), name if alias.name == "*" else alias.name, hops + 1)
                    if source
                    else None
                )
                if origin is not None or alias.name != "*":
                    return origin
        return None

    def _imported_elsewhere(self, example: Path, names: set[str], users: set[Path]) -> set[str]:
        """The names of ``names`` that ``example`` binds only by importing them from workspace files
        that define their own: a library with one API per framework has a ``YatNMN`` in each, and
        a test of ``nmn.linen``'s mentions it without using ``nmn.nnx``'s. A name also reached as
        an attribute (``nnx.YatNMN``) still counts."""
        origins: dict[str, list[Path | None]] = {}
        for node in ast.walk(self._tree(example)):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = self.index.modules.absolute(example, node.module or "", node.level)
            for alias in node.names:
                bound = alias.asname or alias.name
                if bound in names and alias.name != "*":
                    source = self.index.modules.locate(base, example) if base else None
                    origins.setdefault(bound, []).append(
                        self._origin(real_path(source), alias.name) if source else None
                    )
        text = self.index.text(example) or ""
        return {
            name
            for name, where in origins.items()
            if all(w is not None and w not in users for w in where) and not re.search(rf"\.\s*{name}\b", text)
        }

    def _mentioned(self, path: Path) -> set[str]:
        found = self._words.get(path)
        if found is None:
            found = self._words[path] = set(_WORD.findall(self.index.text(path) or ""))
        return found

    def sources(self, example: ExampleSpec) -> list[Path]:
        """The workspace files loading ``example`` runs (its own among them)."""
        return list(self.depths(example))

    def reaching(self, target: Path, examples: list[ExampleSpec]) -> list[ExampleSpec]:
        """The examples whose imports reach ``target``, nearest first (tests before scripts at the
        same distance, then in the order given).

        A library's ``__init__.py`` re-exports every module, so every test of tinygp reaches every
        file of it (15 of 15). Those that use the file come first and alone: an example that
        reaches it without going through a package's re-exports (it imports the file, or a module
        that imports it, by name), or that names a function or class defined in it or in a module
        that imports it so (not one it imports from a file that defines its own: another
        framework's ``YatNMN``). Only when none does are all that reach it run."""
        goal = real_path(target)
        found: list[tuple[int, int, int, ExampleSpec]] = []
        for order, example in enumerate(examples):
            steps = self.depths(example).get(goal)
            if steps is not None:
                found.append((steps, 0 if example.get("kind") == "test" else 1, order, example))
        found.sort(key=lambda item: item[:3])
        if not found:
            return []
        loaded = set().union(*(self.depths(item[3]) for item in found))
        users = {m for m in loaded if m.suffix == ".py" and goal in self._strictly(m, example=False)} | {goal}
        names = set().union(*(self._defined(m) for m in users))
        using = [item for item in found if self._uses(real_path(Path(str(item[3]["path"]))), goal, names, users)]
        return [item[3] for item in using or found]

    def _uses(self, example: Path, goal: Path, names: set[str], users: set[Path]) -> bool:
        if goal in self._strictly(example, example=True):
            return True
        named = names & self._mentioned(example)
        return bool(named and named - self._imported_elsewhere(example, named, users))
