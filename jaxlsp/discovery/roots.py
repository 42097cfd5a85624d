"""The project root a target's examples run from (the folder a user runs ``python -m pytest`` in).

The nearest ancestor of the target that holds ``jaxlsp.toml``, ``pyproject.toml``,
``setup.py``, ``setup.cfg`` or ``.git``, never above ``limit`` (an editor's workspace folder, or
the command line's current folder when it holds the target); with no such marker up to it,
``limit`` itself (a repository unpacked from an archive has no ``.git``: its tests beside
``models/`` are still its call sites); with no limit, the folder above the target's outermost
package (``__init__.py`` folders). Only the file system is looked at.
"""

from __future__ import annotations

from pathlib import Path

MARKERS = ("jaxlsp.toml", "pyproject.toml", "setup.py", "setup.cfg", ".git")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def project_root(target: Path, limit: Path | None = None) -> Path:
    """The root for ``target`` (a file or a folder), as the module docstring says."""
    start = target.resolve()
    folder = start if start.is_dir() else start.parent
    bound = limit.resolve() if limit is not None else None
    if bound is not None and not _inside(folder, bound):
        bound = None  # a target outside the workspace folder: the rule alone decides
    here = folder
    while True:
        if any((here / marker).exists() for marker in MARKERS):
            return here
        if here == bound:
            return bound  # the workspace the user opened (or runs from): not the target's folder alone
        if here.parent == here:
            break
        here = here.parent
    top = folder
    while (top / "__init__.py").is_file() and top.parent != top and (bound is None or top != bound):
        top = top.parent
    return top
