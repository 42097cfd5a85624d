"""Start a cold worker before its request is known: the CLI's one capture, overlapped.

A cold ``jaxlsp trace`` spends its first half second in its own imports, the recipe and the
environment check before a worker could start, and the worker then spends as long again
starting its interpreter, importing its own modules and ``import jax``. :func:`start` launches the
worker first, from what the command line alone says (the interpreter as
:func:`~jaxlsp.capture.environment.interpreters.select_interpreter` picks it, the stage, the memory cap, the
working directory): its bootstrap imports jax (and flax / equinox when the target's file imports
them) while the CLI prepares, then waits for the request on stdin, as every cold worker does.
No user code runs before the request; the request is written only after the environment check
passed, and into the worker's cgroup first (client.py).

:meth:`EarlyWorker.take` hands the process to the capture when it is exactly the worker the
capture would start (same interpreter, stage, memory cap and working directory, still alive) and
the request sets no ``env`` (a profile's variables may change what jax does at import); anything
else kills it and the capture starts a fresh worker, so a wrong guess costs CPU, never a
difference in the result. Nothing here imports asyncio or the recipes: it runs before them.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxlsp.capture.environment import allowed_env, interpreters, userpath
from jaxlsp.capture.launch import staging
from jaxlsp.capture.launch.options import DEFAULT_OPTIONS
from jaxlsp.capture.launch.staging import Stage

#: Modules every early worker imports before its request (installed libraries, never user code).
JAX_MODULES: tuple[str, ...] = ("jax", "jax.numpy")
#: Frameworks imported early too when the target's file imports them: regex over its text -> modules.
FRAMEWORKS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"^\s*(?:from|import)\s+flax\b", re.M), ("flax.linen",)),
    (re.compile(r"^\s*from\s+flax\s+import\s+[^\n]*\bnnx\b|^\s*(?:from|import)\s+flax\.nnx\b", re.M), ("flax.nnx",)),
    (re.compile(r"^\s*(?:from|import)\s+equinox\b", re.M), ("equinox",)),
)
#: A recipe that may choose another interpreter, device or environment than the command line
#: says: no early worker (it would only be killed).
RECIPE_KEYS = re.compile(r"^\s*(?:[\w.]*\.)?(?:python|env)\s*=|\bdevice\s*=\s*[\"'](?!cpu)", re.M)
RECIPE = "jaxlsp.toml"


@dataclass
class Launched:
    """A started worker process: its pipes (the parent's ends) and what it was started with."""

    proc: subprocess.Popen[bytes]
    result_r: int
    out_r: int
    err_r: int
    in_w: int
    result_fd: int  # the result pipe's descriptor number in the worker (the request's resultFd)
    python: str
    stage: Stage
    memory_mb: int | None
    cwd: str
    preload: tuple[str, ...] = ()

    def close_pipes(self) -> None:
        for fd in (self.result_r, self.out_r, self.err_r, self.in_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def launch(python: str, staged: Stage, memory_mb: int | None, cwd: str, preload: Sequence[str] = ()) -> Launched:
    """``python -I -B -c BOOTSTRAP`` in its own session, its stdin, stdout, stderr and result on
    pipes; raises OSError when the interpreter cannot be started."""
    result_r, result_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    argv = staging.worker_command(
        python,
        staged,
        memory_bytes=memory_mb * 1024 * 1024 if memory_mb else None,
        result_fd=result_w,
        preload=preload,
    )
    try:
        proc = subprocess.Popen(
            argv,
            stdin=in_r,
            stdout=out_w,
            stderr=err_w,
            pass_fds=(result_w,),
            start_new_session=True,
            close_fds=True,
            cwd=cwd,
            env=allowed_env.base_environment(),
        )
    except OSError:
        for fd in (result_r, out_r, err_r, in_w):
            os.close(fd)
        raise
    finally:
        for fd in (result_w, out_w, err_w, in_r):
            os.close(fd)
    return Launched(proc, result_r, out_r, err_r, in_w, result_w, python, staged, memory_mb, cwd, tuple(preload))


class EarlyWorker:
    """A worker started ahead of its capture; :meth:`take` it or :meth:`discard` it (once)."""

    def __init__(self, launched: Launched) -> None:
        self.launched: Launched | None = launched

    def take(
        self, python: str, staged: Stage, memory_mb: int | None, cwd: str, request: Mapping[str, Any]
    ) -> Launched | None:
        """The process, when it is the worker this capture would start; else None (and it is gone)."""
        launched, self.launched = self.launched, None
        if launched is None:
            return None
        fits = (
            launched.python == python
            and launched.stage == staged
            and launched.memory_mb == memory_mb
            and launched.cwd == cwd
            and not (launched.preload and request.get("env"))
            and launched.proc.poll() is None
        )
        if fits:
            return launched
        _kill(launched)
        return None

    def discard(self) -> None:
        """Kill it unless a capture took it (a refusal, a recipe error, a wrong guess)."""
        launched, self.launched = self.launched, None
        if launched is not None:
            _kill(launched)


def _kill(launched: Launched) -> None:
    # Only its own group (start_new_session): it has run no user code, so nothing escaped it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(launched.proc.pid, 9)
    with contextlib.suppress(subprocess.TimeoutExpired):
        launched.proc.wait(timeout=5)
    launched.close_pipes()


def start(
    file: Path,
    workspace_root: Path,
    *,
    python: str | None,
    device: str | None,
    recipe: Path | None,
) -> EarlyWorker | None:
    """An early worker for ``jaxlsp trace FILE::NAME`` as the command line gives it, or None when
    the guess is unsure (a recipe that names an interpreter, an environment or a device) or the
    worker cannot start (the capture then says why, as without this)."""
    if device not in (None, "cpu") or not file.is_file():
        return None
    found = recipe if recipe is not None else _nearest_recipe(file, workspace_root)
    try:
        if found is not None and RECIPE_KEYS.search(found.read_text(encoding="utf-8", errors="replace")):
            return None
        staging.check_platform()
        userpath.add_workspace(workspace_root)  # before the worker starts: PYTHONPATH stays outside it
        chosen = interpreters.select_interpreter(workspace_root=workspace_root, request=python)
        resolved = staging.resolve_interpreter(chosen.python)
        staged = staging.stage()
        cwd = str(workspace_root.resolve())
        memory_mb = DEFAULT_OPTIONS.memory_for({"profile": {"device": "cpu"}})  # the CLI's options
        preload = (*JAX_MODULES, *_frameworks(file, workspace_root))
        return EarlyWorker(
            launch(resolved, staged, memory_mb, cwd if os.path.isdir(cwd) else str(staged.path), preload)
        )
    except (OSError, interpreters.InterpreterError, staging.RefusedError):
        return None


def workspace_root_for(file: Path, cwd: Path) -> Path:
    """The current directory when the target is inside it, else the target's folder."""
    file = file.resolve()
    cwd = cwd.resolve()
    return cwd if file.is_relative_to(cwd) else file.parent


def _nearest_recipe(file: Path, workspace_root: Path) -> Path | None:
    """The jaxlsp.toml at or above the target's folder, up to the workspace root."""
    folder, root = file.resolve().parent, workspace_root.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / RECIPE).is_file():
            return candidate / RECIPE
        if candidate == root:
            break
    return None


def _frameworks(file: Path, workspace_root: Path) -> list[str]:
    """flax / equinox modules the target's file imports, unless a folder the user's imports
    search first holds one of that name (the user's copy must be the one imported)."""
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    folders = {file.resolve().parent, workspace_root.resolve()}
    out: list[str] = []
    for pattern, modules in FRAMEWORKS:
        top = modules[0].split(".")[0]
        shadowed = any((f / top).exists() or (f / f"{top}.py").exists() for f in folders)
        if pattern.search(text) and not shadowed:
            out.extend(modules)
    return out
