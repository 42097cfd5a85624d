"""The routes by which an interpreter is chosen, the choice itself (:class:`Selection`) and the
interpreters ``PATH`` offers, as plain data (no process runs here): what both the choice
(``interpreters``) and the environment check (``compatibility``) read."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REQUEST = "--python"
RECIPE = "recipe python"
SETTING = "setting jaxlsp.python"
CLIENT = "client's selected interpreter"
WORKSPACE_VENV = "workspace .venv"
WORKSPACE_VENV_PLAIN = "workspace venv"
CONDA = "CONDA_PREFIX"
VIRTUAL_ENV = "VIRTUAL_ENV"
PATH_PYTHON3 = "python3 on PATH"
PATH_PYTHON = "python on PATH"
OWN = "server's own interpreter"

ROUTES = (
    REQUEST,
    RECIPE,
    SETTING,
    CLIENT,
    WORKSPACE_VENV,
    WORKSPACE_VENV_PLAIN,
    CONDA,
    VIRTUAL_ENV,
    PATH_PYTHON3,
    PATH_PYTHON,
    OWN,
)
PATH_NAMES = {PATH_PYTHON3: "python3", PATH_PYTHON: "python"}


@dataclass(frozen=True)
class Selection:
    """The interpreter to capture in (as it will be started) and the route that chose it."""

    python: str
    route: str

    def describe(self) -> str:
        return f"{self.python} ({self.route})"


def path_candidates(
    environ: Mapping[str, str], workspaces: list[Path], own: str | None = None
) -> list[tuple[str, str]]:
    """``(route, path)`` of the first ``python3`` and the first ``python`` on ``environ``'s ``PATH``,
    as a shell finds them, less the server's own environment (its route comes last) and any
    entry that is relative or inside a workspace (a workspace's files never run before trust)."""
    spaces = [os.path.realpath(w) for w in workspaces]
    own_bin = os.path.realpath(os.path.dirname(own)) if own else None
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for route, name in PATH_NAMES.items():
        for entry in environ.get("PATH", "").split(os.pathsep):
            if not entry or not os.path.isabs(entry):
                continue
            real = os.path.realpath(entry)
            if any(real == w or real.startswith(w.rstrip(os.sep) + os.sep) for w in spaces):
                continue
            candidate = os.path.join(entry, name)
            if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
                continue
            if real != own_bin and candidate not in seen:
                out.append((route, os.path.normpath(candidate)))
                seen.add(candidate)
            break  # the first one on PATH is what the user's shell runs
    return out
