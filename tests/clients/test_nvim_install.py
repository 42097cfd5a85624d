"""Acceptance (issue 48 items 3, 4): the Neovim plugin loaded as a user of Neovim 0.11 loads it,
through ``vim.lsp.config`` / ``vim.lsp.enable`` and no ``setup()``, and the first-run check.

``nvim_install.lua`` runs headless. With no server installed (PATH without ``jaxlsp``) opening two
Python files gives one message that names the missing server and ``pipx install jaxlsp`` / ``uv
tool install jaxlsp``, no client, and ``:checkhealth jaxlsp`` says the same. With an installed
server named through ``vim.lsp.config`` and a trusted folder whose ``.venv`` has no JAX, one
message names the interpreter, the missing JAX and the command that installs it, and
``:checkhealth jaxlsp`` reports it as an error with that command. Without nvim the test fails under
CI and skips elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.clients.conftest import luafile_command, nvim_failure, run_editor

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent.parent / "editors" / "nvim"
WORKSPACE = HERE.parent / "workspaces" / "lsp_trace"
SCRIPT = HERE / "nvim_install.lua"
# scaled inside run_editor (tests/clients/conftest.py), where it waits
TIMEOUT = 180  # seconds (reference machine) for a whole nvim run: a deadline, not a pace


def run(nvim: str, tmp_path: Path, mode: str, cmd: list[str] | None = None) -> tuple[Path, dict[str, Any], str]:
    root = Path(shutil.copytree(WORKSPACE, tmp_path / "project")).resolve()
    xdg = {kind: tmp_path / "xdg" / kind for kind in ("state", "config", "cache", "data")}
    for path in xdg.values():
        path.mkdir(parents=True)
    if mode == "nojax":
        # A project environment without JAX, and the folder trusted "Always" in the server's store.
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
        (xdg["config"] / "jaxlsp").mkdir()
        (xdg["config"] / "jaxlsp" / "trusted.json").write_text(json.dumps({"folders": [str(root)]}))
    config = {
        "plugin": str(PLUGIN),
        "root": str(root),
        "file": str(root / "model.py"),
        "mode": mode,
        "cmd": cmd,
        "report": str(tmp_path / "report.json"),
        "failure": str(tmp_path / "failure.txt"),
    }
    (tmp_path / "nvim-config.json").write_text(json.dumps(config))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "CONDA"))},
        # No jaxlsp anywhere on PATH: the system's folders only.
        "PATH": os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin")),
        "JAXLSP_NVIM_CONFIG": str(tmp_path / "nvim-config.json"),
        **{f"XDG_{kind.upper()}_HOME": str(path) for kind, path in xdg.items()},
    }
    proc, report = run_editor(luafile_command(nvim, SCRIPT), root, env, tmp_path / "report.json", TIMEOUT)
    why = nvim_failure(proc, report, tmp_path)
    assert report.get("ok") is True and proc.returncode == 0, why
    assert report["nvim"].startswith("0.11."), why
    return root, report, why


def test_no_server_installed_one_message_and_checkhealth_say_how_to_install(nvim: str, tmp_path: Path) -> None:
    assert shutil.which("jaxlsp", path=os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin"))) is None
    _, report, why = run(nvim, tmp_path, "missing")
    assert report["clients"] == 0, why
    (note,) = [n for n in report["notes"] if "jaxlsp" in n["msg"]]  # two Python buffers, one message
    assert note["msg"].startswith("jaxlsp: the server `jaxlsp` is not on PATH"), why
    assert "pipx install jaxlsp (or: uv tool install jaxlsp)" in note["msg"], why
    assert "needs only JAX" in note["msg"], why
    health = "\n".join(report["health"])
    assert "ERROR server: `jaxlsp` is not on PATH" in health, health
    assert "pipx install jaxlsp (or: uv tool install jaxlsp) (Python >= 3.11)" in health, health
    assert "vim.lsp.config('jaxlsp', { cmd = { '/path/to/jaxlsp', 'serve' } })" in health, health


def test_vim_lsp_config_server_and_a_venv_without_jax_one_message_and_checkhealth(nvim: str, tmp_path: Path) -> None:
    server = [str(Path(sys.executable).parent / "jaxlsp"), "serve"]
    root, report, why = run(nvim, tmp_path, "nojax", server)
    assert report["cmd"] == server, why
    venv_python = root / ".venv" / "bin" / "python"
    notes = [n["msg"] for n in report["notes"] if "cannot trace" in n["msg"]]
    assert len(notes) == 1, why
    assert notes[0].startswith(f"jaxlsp: The capture environment {venv_python} (workspace .venv) cannot trace"), why
    assert "jax is not installed" in notes[0] and f". To install it, run: {venv_python} -m " in notes[0], why
    health = "\n".join(report["health"])
    assert f"OK server: {server[0]}" in health, health
    assert f"ERROR capture environment: The capture environment {venv_python} (workspace .venv) cannot trace" in health
    assert "- ADVICE:" in health and "run: " in health, health
