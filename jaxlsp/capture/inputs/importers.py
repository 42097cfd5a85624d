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
from collections import deque
from pathlib import Path

from jaxlsp.discovery.callsites.importchain import MAX_CHAIN, imports_of, packages_above
from jaxlsp.discovery.index import WorkspaceIndex
from jaxlsp.textfiles import real_path
from jaxlsp.worker.protocol import ExampleSpec


class ImportGraph:
    """The workspace files each example loads, with how many imports away each one is."""

    def __init__(self, root: Path, index: WorkspaceIndex | None = None) -> None:
        self.root = real_path(root)
        # a fresh index reads from disk, which is what an example's run imports (not an unsaved buffer)
        self.index = index or WorkspaceIndex([self.root])
        self._direct: dict[Path, list[Path]] = {}
        self._depths: dict[Path, dict[Path, int]] = {}

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
        depth: dict[Path, int] = {start: 0}
        todo: deque[Path] = deque([start])
        for above in packages_above(self.index, start):
            depth.setdefault(above, 1)
            todo.append(above)
        if example.get("kind") == "test":
            for conftest in self._conftests(start):
                depth.setdefault(conftest, 1)
                todo.append(conftest)
        while todo and len(depth) < MAX_CHAIN:
            file = todo.popleft()
            for found in self._run_imports(file) if file == start else self._imports(file):
                if found not in depth:
                    depth[found] = depth[file] + 1
                    todo.append(found)
        self._depths[start] = depth
        return depth

    def sources(self, example: ExampleSpec) -> list[Path]:
        """The workspace files loading ``example`` runs (its own among them)."""
        return list(self.depths(example))

    def reaching(self, target: Path, examples: list[ExampleSpec]) -> list[ExampleSpec]:
        """The examples whose imports reach ``target``, nearest first (tests before scripts at the
        same distance, then in the order given)."""
        goal = real_path(target)
        found: list[tuple[int, int, int, ExampleSpec]] = []
        for order, example in enumerate(examples):
            steps = self.depths(example).get(goal)
            if steps is not None:
                found.append((steps, 0 if example.get("kind") == "test" else 1, order, example))
        found.sort(key=lambda item: item[:3])
        return [item[3] for item in found]
