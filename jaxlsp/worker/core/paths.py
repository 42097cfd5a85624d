"""How the graph spells file paths, so that a graph file opens on another machine (stdlib only).

- A workspace file is relative to the base (the workspace root; in the CLI, the recipe's folder):
  ``models/mlp.py``, ``../shared/layers.py``.
- A library file is relative to the ``sys.path`` entry it was imported from, with its top-level
  package named: ``flax/linen/linear.py`` in package ``flax``.
- jaxlsp's own files (the staged worker) are not user code: their frames are dropped.
- Pseudo-files (``<string>``, ``<frozen runpy>``) stay as they are.

No absolute path reaches the graph; the language server, which knows the roots, resolves them
again when it reads them (``jaxlsp.graph.store``).
"""

from __future__ import annotations

import os
import sys

import jaxlsp
from jaxlsp.worker.core.failures import Workspace

# The jaxlsp package this code runs from (a staged copy in the user's interpreter, or a checkout).
OWN_ROOT = os.path.dirname(os.path.realpath(jaxlsp.__file__))


def is_own(path: str) -> bool:
    """Whether ``path`` is a file of jaxlsp itself (never a frame of the user's program)."""
    if not path or path.startswith("<"):
        return False
    real = os.path.realpath(path)
    return real.startswith(OWN_ROOT + os.sep)


class Spelling:
    """Spells absolute paths for the graph: ``(path, package)``, the package None for workspace
    and other files. ``roots`` maps each library package seen to its ``sys.path`` entry (for
    the server, which resolves them again; never written into the graph)."""

    def __init__(self, base: str, workspace: Workspace, search: list[str] | None = None):
        self.base = os.path.realpath(base) if base else ""
        self.workspace = workspace
        entries = [os.path.realpath(p or os.curdir) for p in (sys.path if search is None else search)]
        # Longest first: a venv's site-packages before a folder above it.
        self.entries = sorted({e for e in entries if os.path.isdir(e)}, key=len, reverse=True)
        self.roots: dict[str, str] = {}
        self._cache: dict[str, tuple[str, str | None]] = {}

    def spell(self, path: str) -> tuple[str, str | None]:
        found = self._cache.get(path)
        if found is None:
            found = self._cache[path] = self._spell(path)
        return found

    def _spell(self, path: str) -> tuple[str, str | None]:
        if not path or path.startswith("<"):
            return path or "<unknown>", None
        real = os.path.realpath(path)
        if self.workspace.contains(real) or not self.entries:
            return self.relative(real), None
        for entry in self.entries:
            if real.startswith(entry + os.sep):
                rel = os.path.relpath(real, entry)
                package = rel.split(os.sep, 1)[0]
                package = package[:-3] if package.endswith(".py") else package
                self.roots.setdefault(package, entry)
                return rel.replace(os.sep, "/"), package
        return self.relative(real), None

    def relative(self, path: str) -> str:
        """``path`` relative to the base, ``/``-separated (``../x.py`` when outside it)."""
        real = os.path.realpath(path)
        if not self.base:
            return os.path.basename(real)
        return os.path.relpath(real, self.base).replace(os.sep, "/")
