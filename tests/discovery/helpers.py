"""Discover snippets inside a throw-away workspace on disk."""

from __future__ import annotations

import textwrap
from pathlib import Path

from jaxlsp.discovery import Classifier, Discovery, WorkspaceIndex


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def discover(root: Path, files: dict[str, str], target: str = "main.py") -> Discovery:
    write_tree(root, files)
    return Classifier(WorkspaceIndex([root])).discover(root / target)


def found(root: Path, source: str, **extra: str) -> dict[str, str]:
    """``{qualified name: kind}`` of the entrypoints of ``source`` (as ``main.py``)."""
    files = {"main.py": source, **{k.replace("__", "/") + ".py": v for k, v in extra.items()}}
    return {e.name: e.kind for e in discover(root, files).entrypoints}
