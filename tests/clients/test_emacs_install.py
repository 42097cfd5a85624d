"""The first-run check of ``editors/emacs/jaxlsp.el`` (issue 48 item 4), in Emacs batch mode with
eglot 1.9: with no server on PATH, starting eglot on a Python file is refused with one message that
names the server and ``pipx install jaxlsp`` / ``uv tool install jaxlsp``; with an installed server
and a trusted project whose ``.venv`` has no JAX, one message names that interpreter, the missing
JAX and the command that installs it. Without emacs the test fails under CI and skips elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.clients import test_emacs
from tests.clients.conftest import run_editor

emacs = test_emacs.emacs  # the fixture: emacs and eglot 1.9, or a skip (a failure under CI)

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent.parent / "editors" / "emacs"
WORKSPACE = HERE.parent / "workspaces" / "lsp_trace"
SCRIPT = HERE / "emacs_install.el"
SYSTEM_PATH = os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin"))
# scaled inside run_editor (tests/clients/conftest.py), where it waits
TIMEOUT = 180  # seconds (reference machine) for a whole Emacs run: a deadline, not a pace


def run(emacs: str, tmp_path: Path, mode: str, command: list[str] | None = None) -> tuple[Path, dict[str, Any]]:
    root = Path(shutil.copytree(WORKSPACE, tmp_path / "project")).resolve()
    (root / ".git").mkdir()  # a project root for project.el
    if mode == "nojax":
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    config = {
        "plugin": str(PACKAGE),
        "root": str(root),
        "file": str(root / "model.py"),
        "mode": mode,
        "command": command,
        "report": str(tmp_path / "report.json"),
    }
    (tmp_path / "emacs-config.json").write_text(json.dumps(config))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "CONDA"))},
        "PATH": SYSTEM_PATH,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "JAXLSP_EMACS_CONFIG": str(tmp_path / "emacs-config.json"),
    }
    proc, report = run_editor([emacs, "--batch", "-Q", "-l", str(SCRIPT)], root, env, tmp_path / "report.json", TIMEOUT)
    assert report.get("ok") is True and proc.returncode == 0, (proc.returncode, report, proc.stderr[-3000:])
    return root, report


def test_no_server_installed_says_what_and_how_to_install(emacs: str, tmp_path: Path) -> None:
    assert shutil.which("jaxlsp", path=SYSTEM_PATH) is None
    _, report = run(emacs, tmp_path, "missing")
    assert report["server"] is False, report
    error = report["error"]
    assert error.startswith('jaxlsp: the server "jaxlsp" is not on PATH'), report
    assert "pipx install jaxlsp (or: uv tool install jaxlsp)" in error and "needs only JAX" in error, report


def test_a_trusted_venv_without_jax_one_message_with_the_install_command(emacs: str, tmp_path: Path) -> None:
    root, report = run(emacs, tmp_path, "nojax", [str(Path(sys.executable).parent / "jaxlsp"), "serve"])
    venv_python = root / ".venv" / "bin" / "python"
    notes = [m for m in report["messages"] if "cannot trace" in m]
    assert len(notes) == 1, report["messages"]
    assert notes[0].startswith(f"jaxlsp: The capture environment {venv_python} (workspace .venv) cannot trace"), notes
    assert "jax is not installed" in notes[0] and f". To install it, run: {venv_python} -m " in notes[0], notes
