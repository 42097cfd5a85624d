"""Which Python interpreter captures a target, and which route chose it. No pygls, no subprocess.

The order (docs/environments.md): an explicit interpreter for this trace (``--python`` on the
command line, then the recipe profile's ``python``), the setting ``jaxlsp.python``, the client's
selected interpreter (the VS Code extension passes the Python extension's choice), ``.venv/`` or
``venv/`` in the workspace folder, an active ``CONDA_PREFIX`` or ``VIRTUAL_ENV``, then the
``python3`` (or ``python``) on ``PATH`` when it has JAX (and the target's library, when the kind is
known), and finally the server's own interpreter.

Up to the ``PATH`` route, selection only looks at paths (``is_file``, ``os.access``). The ``PATH``
route has to ask the interpreter what it has (the environment probe, cached): that runs a process,
so only a caller past the workspace's trust (or the CLI, an explicit user action) may let it
(``search_path``); ``PATH`` entries that are relative or inside the workspace are never used. An
interpreter named explicitly (the first four routes) that does not exist is an error, never
silently replaced by the next route; the implicit routes are skipped when their interpreter is
missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from jaxlsp.capture.environment.routes import (
    CLIENT as CLIENT,
)
from jaxlsp.capture.environment.routes import (
    CONDA as CONDA,
)
from jaxlsp.capture.environment.routes import (
    OWN as OWN,
)
from jaxlsp.capture.environment.routes import (
    PATH_NAMES as PATH_NAMES,
)
from jaxlsp.capture.environment.routes import (
    PATH_PYTHON as PATH_PYTHON,
)
from jaxlsp.capture.environment.routes import (
    PATH_PYTHON3 as PATH_PYTHON3,
)
from jaxlsp.capture.environment.routes import (
    RECIPE as RECIPE,
)
from jaxlsp.capture.environment.routes import (
    REQUEST as REQUEST,
)
from jaxlsp.capture.environment.routes import (
    ROUTES as ROUTES,
)
from jaxlsp.capture.environment.routes import (
    SETTING as SETTING,
)
from jaxlsp.capture.environment.routes import (
    VIRTUAL_ENV as VIRTUAL_ENV,
)
from jaxlsp.capture.environment.routes import (
    WORKSPACE_VENV as WORKSPACE_VENV,
)
from jaxlsp.capture.environment.routes import (
    WORKSPACE_VENV_PLAIN as WORKSPACE_VENV_PLAIN,
)
from jaxlsp.capture.environment.routes import (
    Selection as Selection,
)
from jaxlsp.capture.environment.routes import (
    path_candidates as path_candidates,
)

#: Decides whether an interpreter found on ``PATH`` can trace (runs it: only past trust).
PathCheck = Callable[[str, "str | None"], bool]


class InterpreterError(Exception):
    """An explicitly named interpreter that cannot be used; the message names it and its route."""


def select_interpreter(
    *,
    workspace_root: Path,
    request: str | None = None,
    recipe: str | None = None,
    setting: str | None = None,
    client: str | None = None,
    environ: Mapping[str, str] | None = None,
    own: str | None = None,
    kind: str | None = None,
    search_path: bool = True,
    path_check: PathCheck | None = None,
) -> Selection:
    """The first route that names an interpreter; raises :class:`InterpreterError` when an explicit
    one is not an executable file (or a command not found on ``PATH``).

    ``search_path`` False keeps selection to paths (a caller before the workspace's trust);
    ``path_check`` replaces the environment probe for the ``PATH`` route (tests)."""
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
    own_python = own or sys.executable
    if search_path:
        check = path_check or _has_jax
        for route, candidate in path_candidates(env, [workspace_root], own_python):
            if check(candidate, kind):
                return Selection(candidate, route)
    return Selection(own_python, OWN)


def _has_jax(python: str, kind: str | None) -> bool:
    """Whether ``python`` has JAX (and the library ``kind`` needs) where it finds packages when
    the user runs it, and is not the server's own environment: the probe, cached."""
    from jaxlsp.capture.environment import compatibility  # it imports this module

    probe, _ = compatibility.CACHE.probe(python, counted=False)
    if probe.error is not None or os.path.realpath(probe.prefix or "/") == os.path.realpath(sys.prefix):
        return False
    return compatibility.usable(probe, ("jax", "jaxlib", *compatibility.needs_for(kind)))


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
    if route in PATH_NAMES:
        return (
            f"the {PATH_NAMES[route]} your shell runs ({selection.python}, first on PATH), which has JAX: no --python,"
            f" no .venv or venv in {workspace_root}, no active CONDA_PREFIX or VIRTUAL_ENV"
        )
    return (
        f"nothing else named one: no --python, no .venv or venv in {workspace_root}, no active CONDA_PREFIX or"
        " VIRTUAL_ENV, no python3 or python on PATH with JAX; this is the interpreter jaxlsp itself runs in"
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
