"""Module names and import resolution on the file system, the way Python would do it.

A file's module name is package-qualified when ``__init__.py`` files make it part of a package,
else its stem. An absolute import is looked up from the importer's folder first (a script's
``sys.path[0]``), then from the folder above its top-level package, then the folders pytest's
``pythonpath`` setting names (pytestconfig.py), then the workspace roots and their ``src/``
folders. Everything is cached; :meth:`ModuleMap.invalidate` forgets it when files appear or
disappear.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jaxlsp.textfiles import real_path


class ModuleMap:
    def __init__(self, roots: list[Path], exists: Callable[[Path], bool] | None = None) -> None:
        self.roots = [real_path(r) for r in roots]
        self._exists = exists or Path.is_file
        self._is_package: dict[Path, bool] = {}
        self._located: dict[tuple[Path, str], Path | None] = {}
        self._pytest_paths: list[Path] | None = None

    def invalidate(self) -> None:
        self._is_package.clear()
        self._located.clear()
        self._pytest_paths = None

    def pytest_paths(self) -> list[Path]:
        """The folders pytest's ``pythonpath`` setting adds under each root (pytestconfig.py)."""
        if self._pytest_paths is None:
            from jaxlsp.discovery.pytestconfig import pythonpath

            self._pytest_paths = [p for r in self.roots for p in pythonpath(r)]
        return self._pytest_paths

    def _package_dir(self, folder: Path) -> bool:
        known = self._is_package.get(folder)
        if known is None:
            known = self._is_package[folder] = self._exists(folder / "__init__.py")
        return known

    def package_parts(self, path: Path) -> tuple[list[str], Path]:
        """The package names above ``path`` (outermost first) and the folder holding the top one."""
        parts: list[str] = []
        folder = path.parent
        while self._package_dir(folder) and folder.parent != folder:
            parts.append(folder.name)
            folder = folder.parent
        parts.reverse()
        return parts, folder

    def module_name(self, path: Path) -> str:
        parts, _ = self.package_parts(path)
        if path.name != "__init__.py":
            parts = [*parts, path.stem]
        return ".".join(parts) or path.stem

    def package_of(self, path: Path) -> str:
        """The package that relative imports in ``path`` start from."""
        parts, _ = self.package_parts(path)
        return ".".join(parts)

    def absolute(self, path: Path, module: str, level: int) -> str:
        """The absolute name of ``from <level dots><module> import ...`` written in ``path``."""
        if level == 0:
            return module
        parts = self.package_of(path).split(".") if self.package_of(path) else []
        if level > 1:
            parts = parts[: max(0, len(parts) - (level - 1))]
        if module:
            parts.append(module)
        return ".".join(parts)

    def search_roots(self, importer: Path) -> list[Path]:
        _, top = self.package_parts(importer)
        seen: list[Path] = []
        for root in (importer.parent, top, *self.pytest_paths(), *self.roots, *(r / "src" for r in self.roots)):
            if root not in seen:
                seen.append(root)
        return seen

    def locate(self, module: str, importer: Path) -> Path | None:
        """The workspace file that defines ``module`` as seen from ``importer``, if any."""
        if not module:
            return None
        if module == self.module_name(importer):
            return importer
        rel = Path(*module.split("."))
        for root in self.search_roots(importer):
            key = (root, module)
            if key in self._located:
                found = self._located[key]
            else:
                found = None
                for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
                    if self._exists(candidate):
                        found = candidate
                        break
                self._located[key] = found
            if found is not None:
                return found
        return None
