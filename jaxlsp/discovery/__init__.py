"""Import-free discovery of JAX functions and Flax / Equinox module classes (libcst, no jax)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jaxlsp.discovery.classify import Classifier
    from jaxlsp.discovery.entrypoints import Discovery, Entrypoint, Span
    from jaxlsp.discovery.index import WorkspaceIndex, iter_python_files, may_matter
    from jaxlsp.discovery.summary import SetupField

# Imported on first use: libcst takes 1-2 s to import, and a submodule that needs none of it
# (``jaxlsp.discovery.roots``, which the CLI's trace asks for the project root) should not pay it.
_LAZY = {
    "Classifier": "classify",
    "Discovery": "entrypoints",
    "Entrypoint": "entrypoints",
    "Span": "entrypoints",
    "WorkspaceIndex": "index",
    "iter_python_files": "index",
    "may_matter": "index",
    "SetupField": "summary",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # __import__, not importlib.import_module: the import statement's path, which -X importtime
    # reports (the server's no-jax test reads that report)
    __import__(f"{__name__}.{module}")
    value = getattr(sys.modules[f"{__name__}.{module}"], name)
    globals()[name] = value
    return value


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
    from jaxlsp.discovery.classify import Classifier
    from jaxlsp.discovery.index import WorkspaceIndex, iter_python_files, may_matter

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
