"""Import-free discovery of JAX functions and Flax / Equinox module classes (libcst, no jax)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from jaxlsp.discovery.classify import Classifier
from jaxlsp.discovery.entrypoints import Discovery, Entrypoint, Span
from jaxlsp.discovery.index import WorkspaceIndex, iter_python_files, may_matter
from jaxlsp.discovery.summary import SetupField

__all__ = [
    "Classifier",
    "Discovery",
    "Entrypoint",
    "SetupField",
    "Span",
    "WorkspaceIndex",
    "discover_paths",
    "iter_python_files",
    "may_matter",
]


def discover_paths(paths: Iterable[Path], roots: list[Path] | None = None) -> list[Discovery]:
    """Discover every file under ``paths`` (files or folders), resolving imports within ``roots``."""
    paths = [Path(p) for p in paths]
    index = WorkspaceIndex(roots if roots is not None else [Path.cwd()])
    classifier = Classifier(index)
    out = []
    for path in paths:
        for file in iter_python_files(path):
            text = index.text(file)
            if text is None or not may_matter(file, text):
                continue
            out.append(classifier.discover(file))
    return out
