"""Which Python interpreter captures a target, and which route chose it. No pygls, no subprocess.

The order (docs/environments.md): an explicit interpreter for this trace (``--python`` on the
command line, then the recipe profile's ``python``), the setting ``jaxlsp.python``, the client's
selected interpreter (the VS Code extension passes the Python extension's choice), ``.venv/`` or
``venv/`` in the workspace folder, an active ``CONDA_PREFIX`` or ``VIRTUAL_ENV``, and finally the
server's own interpreter.

Selection only looks at paths (``is_file``, ``os.access``): it never runs the interpreter, so it is
safe before the workspace is trusted. An interpreter named explicitly (the first four routes) that
does not exist is an error, never silently replaced by the next route; the implicit routes are
skipped when their interpreter is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
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
OWN = "server's own interpreter"

ROUTES = (REQUEST, RECIPE, SETTING, CLIENT, WORKSPACE_VENV, WORKSPACE_VENV_PLAIN, CONDA, VIRTUAL_ENV, OWN)


class InterpreterError(Exception):
    """An explicitly named interpreter that cannot be used; the message names it and its route."""


@dataclass(frozen=True)
class Selection:
    """The interpreter to capture in (as it will be started) and the route that chose it."""

    python: str
    route: str

    def describe(self) -> str:
        return f"{self.python} ({self.route})"


def select_interpreter(
    *,
    workspace_root: Path,
    request: str | None = None,
    recipe: str | None = None,
    setting: str | None = None,
    client: str | None = None,
    environ: Mapping[str, str] | None = None,
    own: str | None = None,
) -> Selection:
    """The first route that names an interpreter; raises :class:`InterpreterError` when an explicit
    one is not an executable file (or a command not found on ``PATH``)."""
    env = os.environ if environ is None else environ
    for route, value in ((REQUEST, request), (RECIPE, recipe), (SETTING, setting), (CLIENT, client)):
        if value:
            return Selection(_explicit(value, route, env), route)
    for route, folder in ((WORKSPACE_VENV, ".venv"), (WORKSPACE_VENV_PLAIN, "venv")):
        found = _in_prefix(workspace_root / folder)
        if found:
            return Selection(found, route)
    for route in (CONDA, VIRTUAL_ENV):
        prefix = env.get(route)
        if prefix:
            found = _in_prefix(Path(prefix))
            if found:
                return Selection(found, route)
    return Selection(own or sys.executable, OWN)


def explain(selection: Selection, workspace_root: Path, environ: Mapping[str, str] | None = None) -> str:
    """Why ``selection`` was picked, in words (``jaxlsp env``): what named it, or what was looked
    for and not found before it."""
    env = os.environ if environ is None else environ
    route = selection.route
    if route in (REQUEST, RECIPE, SETTING, CLIENT):
        return f"named by the {route}"
    if route in (WORKSPACE_VENV, WORKSPACE_VENV_PLAIN):
        return f"the project's own environment {workspace_root / route.split()[-1]} (nothing named one explicitly)"
    if route in (CONDA, VIRTUAL_ENV):
        return f"the active environment ${route} = {env.get(route)} (no .venv or venv in {workspace_root})"
    return (
        f"nothing else named one: no --python, no .venv or venv in {workspace_root}, no active CONDA_PREFIX or"
        " VIRTUAL_ENV; this is the interpreter jaxlsp itself runs in"
    )


def project_env_hint(workspace_root: Path) -> str:
    """The fix when no project interpreter exists: make one beside the project, never install into
    jaxlsp's own (a pipx or uv tool environment stays the tool's)."""
    return (
        f"give the project its own environment: cd {workspace_root} && python3 -m venv .venv && "
        ".venv/bin/python -m pip install 'jax[cpu]' (jaxlsp finds .venv in the folder it runs from), "
        "or name an interpreter with JAX: --python PATH"
    )


def _explicit(value: str, route: str, env: Mapping[str, str]) -> str:
    if "/" not in value:  # a command name, as a recipe may write it ("python3.12")
        found = shutil.which(value, path=env.get("PATH"))
        if found is None:
            raise InterpreterError(f"the interpreter {value!r} ({route}) is not a command found on PATH")
        return found
    # Absolute but not resolved: a venv's bin/python is a symlink whose own path selects the venv.
    path = Path(os.path.abspath(Path(value).expanduser()))
    if not path.is_file():
        raise InterpreterError(f"the interpreter {value} ({route}) does not exist")
    if not os.access(path, os.X_OK):
        raise InterpreterError(f"the interpreter {value} ({route}) is not executable")
    return str(path)


def _in_prefix(prefix: Path) -> str | None:
    """``PREFIX/bin/python`` (``python3`` as a fallback) when it is an executable file."""
    for name in ("python", "python3"):
        candidate = prefix / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


def is_conda_env(python: str) -> Path | None:
    """The conda environment holding ``python`` (its prefix has ``conda-meta/``), else None."""
    prefix = Path(python).parent.parent
    return prefix if (prefix / "conda-meta").is_dir() else None
