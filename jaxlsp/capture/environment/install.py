"""The reviewed install: the exact command that fixes a capture environment, and running it with a log.

The command always targets the selected interpreter's own environment: ``PYTHON -m pip install``
with that interpreter, or ``conda install --prefix PREFIX`` for a conda environment (when a conda
executable is known). The server's own environment is touched only when it is the selected one.
Nothing here asks the user: the caller shows :attr:`InstallPlan.text` and runs the plan only on
an explicit yes. pip and conda read their own configuration (``pip.conf``, ``PIP_INDEX_URL``,
``.condarc``...) as they would in a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from jaxlsp.capture.environment.interpreters import Selection, is_conda_env

Tool = Literal["pip", "conda"]


@dataclass(frozen=True)
class InstallPlan:
    """What would be run, each command an argv, in the selected interpreter's environment."""

    selection: Selection
    tool: Tool
    requirements: list[str]
    commands: list[list[str]]

    @property
    def text(self) -> str:
        """The command as the user reads it (and could paste into a terminal)."""
        return " && ".join(shlex.join(c) for c in self.commands)


@dataclass(frozen=True)
class InstallResult:
    ok: bool
    returncode: int
    log: Path
    took: float  # seconds
    tail: str  # the last lines of the output


def conda_executable(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    exe = env.get("CONDA_EXE")
    if exe and os.access(exe, os.X_OK):
        return exe
    return shutil.which("conda", path=env.get("PATH")) or shutil.which("mamba", path=env.get("PATH"))


def _conda_specs(requirements: list[str]) -> list[str]:
    """pip requirements in conda-forge's spelling (``jax[cpu]>=X`` is ``jax>=X`` plus ``jaxlib>=X``)."""
    out: list[str] = []
    for req in requirements:
        name, extra, rest = req.partition("[")
        if not extra:
            out.append(req)
            continue
        extras, _, spec = rest.partition("]")
        out.append(f"{name}{spec}")
        out.append(f"jaxlib{spec}" if extras == "cpu" else "jaxlib=*=*cuda*")
    return list(dict.fromkeys(out))


def plan_install(
    selection: Selection, requirements: list[str], *, has_pip: bool = True, environ: Mapping[str, str] | None = None
) -> InstallPlan:
    """The command installing ``requirements`` into ``selection``'s environment."""
    prefix = is_conda_env(selection.python)
    conda = conda_executable(environ) if prefix is not None else None
    if prefix is not None and conda is not None:
        command = [conda, "install", "--yes", "--prefix", str(prefix), "-c", "conda-forge", *_conda_specs(requirements)]
        return InstallPlan(selection, "conda", list(requirements), [command])
    commands = [] if has_pip else [[selection.python, "-m", "ensurepip", "--upgrade"]]
    commands.append([selection.python, "-m", "pip", "install", *requirements])
    return InstallPlan(selection, "pip", list(requirements), commands)


def log_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jaxlsp" / "logs"


async def run_install(plan: InstallPlan, on_line: Callable[[str], None] | None = None) -> InstallResult:
    """Run ``plan`` (once the user said yes), every line of output into a log file; a cancel kills it."""
    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"install-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{id(plan) % 10000}.log"
    # No PYTHONPATH / PYTHONHOME of the server's: pip must see the selected environment only. A
    # scratch working directory: a workspace folder named ``pip`` must not shadow pip.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    t0 = time.perf_counter()
    tail: list[str] = []
    code = 0
    with open(log, "w", encoding="utf-8") as out, tempfile.TemporaryDirectory(prefix="jaxlsp-install-") as cwd:
        out.write(
            f"# jaxlsp install into {plan.selection.describe()}\n# command: {plan.text}\n"
            f"# started: {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        for command in plan.commands:
            out.write(f"$ {shlex.join(command)}\n")
            out.flush()
            try:
                proc = await asyncio.create_subprocess_exec(
                    *command,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                out.write(f"could not start: {exc}\n")
                tail.append(f"could not start {command[0]}: {exc}")
                code = 127
                break
            assert proc.stdout is not None
            try:
                while raw := await proc.stdout.readline():
                    line = raw.decode("utf-8", "replace").rstrip("\n")
                    out.write(line + "\n")
                    tail = [*tail[-19:], line]
                    if on_line is not None:
                        on_line(line)
                code = await proc.wait()
            except asyncio.CancelledError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                out.write("# cancelled: the install was stopped\n")
                raise
            out.write(f"# exit status {code}\n")
            if code != 0:
                break
        took = time.perf_counter() - t0
        out.write(f"# {'done' if code == 0 else 'failed'} in {took:.1f} s\n")
    return InstallResult(code == 0, code, log, took, "\n".join(tail))
