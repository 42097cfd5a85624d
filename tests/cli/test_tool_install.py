"""Acceptance (issue 48 item 2): the CLI installed as a tool, the way users install Ruff or Black.

The wheel built from this tree goes into its own environment with ``uv tool install`` and with
``pipx install`` (HOME, the tool folders and PATH all inside ``tmp_path``; the test venv's ``bin``
is not on PATH), and that environment has no JAX. A project whose ``.venv`` has JAX and Flax but
not jaxlsp (nor pygls, lsprotocol, libcst) is traced from its own folder with no ``--python``: the
capture runs in the project's ``.venv``, which ``jaxlsp env`` names and says why. From a folder
with no environment, ``jaxlsp env`` says it fell back to the tool's own interpreter, that it lacks
JAX, and how to give the project its own environment, not how to install JAX into the tool's.

The tools resolve jaxlsp's dependencies from the package index (as a user's install does); outside
CI a missing ``uv`` or ``pipx`` skips (``make install`` brings both with the dev extra).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import deadlines
from tests.capture.environments.conftest import make_venv
from tests.clients.conftest import missing_tool

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ROOT / "tests" / "workspaces" / "lsp_trace"
VENV_BIN = Path(sys.executable).parent
# What a project's environment never needs: jaxlsp and the server's own libraries.
SERVER_PARTS = ("jaxlsp", "__editable__", "pygls", "lsprotocol", "libcst", "tomlkit")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """jaxlsp's wheel, built from a copy of this tree (setuptools' in-tree build/ keeps stale files)."""
    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "jaxlsp", source / "jaxlsp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    deadlines.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder), str(source)],
        300,
        check=True,
        capture_output=True,
    )
    (built,) = folder.glob("jaxlsp-*.whl")
    return built


def project(tmp: Path) -> Path:
    """A copy of the lsp_trace workspace with a ``.venv`` holding JAX and Flax, not jaxlsp."""
    root = Path(shutil.copytree(WORKSPACE, tmp / "project")).resolve()
    python = make_venv(root / ".venv", hide=SERVER_PARTS)
    probe = subprocess.run(
        [str(python), "-c", "import jax, flax\ntry:\n import jaxlsp\nexcept ImportError:\n print('ok')"],
        capture_output=True,
        text=True,
        cwd=root,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert probe.stdout.strip() == "ok", probe
    return root


def tool_env(tmp: Path) -> tuple[dict[str, str], Path]:
    """A user's environment in ``tmp``: its own HOME, tool folders and PATH (not the test venv's)."""
    home, bin_dir = tmp / "home", tmp / "home" / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VIRTUAL_ENV", "CONDA", "PYTHON", "PIPX_", "UV_"))
    }
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
        XDG_CACHE_HOME=str(tmp / "cache"),
        XDG_CONFIG_HOME=str(tmp / "config"),
        XDG_DATA_HOME=str(tmp / "data"),
        PIPX_HOME=str(home / ".local" / "pipx"),
        PIPX_BIN_DIR=str(bin_dir),
        UV_TOOL_DIR=str(home / ".local" / "uv-tools"),
        UV_TOOL_BIN_DIR=str(bin_dir),
        UV_CACHE_DIR=str(tmp / "uv-cache"),
    )
    return env, bin_dir


def install(installer: str, wheel: Path, env: dict[str, str]) -> None:
    tool = shutil.which(installer, path=str(VENV_BIN)) or shutil.which(installer)
    if tool is None:
        missing_tool(f"{installer} is not installed (pip install {installer}: the dev extra brings it)")
    assert tool is not None
    argv = {
        "uv": [tool, "tool", "install", "--python", sys.executable, str(wheel)],
        "pipx": [tool, "install", "--python", sys.executable, str(wheel)],
    }[installer]
    done = deadlines.run(argv, 600, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{installer} install failed:\n{done.stdout}\n{done.stderr}"


def tool_python(script: Path) -> str:
    """The interpreter on the console script's ``#!`` line: the tool's own environment."""
    first = script.read_text().splitlines()[0]
    return first.removeprefix("#!").strip().split()[0]


@pytest.mark.parametrize("installer", ["uv", "pipx"])
def test_the_wheel_installed_as_a_tool_traces_in_the_projects_venv(installer: str, wheel: Path, tmp_path: Path) -> None:
    env, bin_dir = tool_env(tmp_path)
    install(installer, wheel, env)
    jaxlsp = bin_dir / "jaxlsp"
    assert jaxlsp.is_file(), list(bin_dir.iterdir())
    own = tool_python(jaxlsp)
    assert not Path(own).is_relative_to(VENV_BIN.parent), own  # its own environment, not the test venv
    no_jax = subprocess.run([own, "-c", "import jax"], capture_output=True, text=True, env=env)
    assert no_jax.returncode != 0, "the tool's environment must not have JAX"

    root = project(tmp_path)
    # jaxlsp env from the project's folder: the project's .venv, and why.
    checked = deadlines.run([str(jaxlsp), "env", "--json"], 120, cwd=root, env=env, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["python"] == str(root / ".venv" / "bin" / "python"), report
    assert report["route"] == "workspace .venv" and report["ok"] is True, report
    assert report["why"] == f"the project's own environment {root / '.venv'} (nothing named one explicitly)", report
    assert report["packages"]["flax"], report

    # jaxlsp trace from the project's folder, no --python: captured in the project's .venv.
    out = tmp_path / "predict.json"
    traced = deadlines.run(
        [str(jaxlsp), "trace", "model.py::predict", "-o", str(out)],
        300,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert (root / "IMPORTED").exists()  # the project's code ran, in the capture
    graph = json.loads(out.read_text())
    # The only interpreter with JAX and Flax is the project's .venv (the tool's has neither, and
    # the test venv is not on PATH), and the trace names it.
    assert graph["versions"]["jax"] and graph["versions"]["flax"], graph["versions"]
    assert str(root / ".venv" / "bin" / "python") in traced.stdout + traced.stderr, traced.stdout + traced.stderr

    # From a folder with no environment: the tool's own interpreter, which lacks JAX; the fix is a
    # project environment, never an install into the tool's.
    bare = tmp_path / "bare"
    bare.mkdir()
    fallback = deadlines.run([str(jaxlsp), "env"], 120, cwd=bare, env=env, capture_output=True, text=True)
    assert fallback.returncode == 1, fallback.stdout + fallback.stderr
    text = fallback.stdout
    assert "(server's own interpreter) cannot trace: jax is not installed" in text, text
    assert f"why this interpreter: nothing else named one: no --python, no .venv or venv in {bare}" in text, text
    assert f"cd {bare} && python3 -m venv .venv && .venv/bin/python -m pip install 'jax[cpu]'" in text, text
    assert f"{own} -m pip install" not in text, text
