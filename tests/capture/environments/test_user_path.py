"""The user's own Python (issue 47): JAX reachable only through ``PYTHONPATH`` or the user site is
found by ``jaxlsp env`` and traces, as when the user runs that interpreter; nothing a workspace
controls is put on the capture's path; ``tpu`` devices are accepted and refused without a TPU
backend, before any import.

The layouts are made like a TPU VM image's: a venv without any package, and a folder that is not a
site-packages folder (``/opt/...`` on the image) holding links to the runner's packages, named by
``PYTHONPATH`` only. Each run is a real ``python -m jaxlsp`` in a copy of
``tests/workspaces/environments``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.environments.conftest import MAIN_SITE, copy_env_workspace, site_of
from tests.capture.environments.test_cli import FUNCTION, run

PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"


def bare_venv(dest: Path, system_site: bool = False) -> Path:
    """A venv with nothing installed (``system_site``: it says include-system-site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    if system_site:
        cfg = dest / "pyvenv.cfg"
        cfg.write_text(
            cfg.read_text().replace("include-system-site-packages = false", "include-system-site-packages = true")
        )
    assert not any(p.name.startswith("jax") for p in site_of(dest).iterdir())
    return dest / "bin" / "python"


def package_folder(dest: Path) -> Path:
    """A plain folder (not named site-packages) linking the runner's packages, jax among them."""
    dest.mkdir(parents=True)
    for entry in MAIN_SITE.iterdir():
        if entry.name == "__pycache__" or entry.suffix == ".pth" or entry.name.startswith(("jaxlsp", "_jaxlsp")):
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return copy_env_workspace(tmp_path)


def test_jax_on_pythonpath_is_found_by_env_and_traces(ws: Path, tmp_path: Path) -> None:
    python = bare_venv(tmp_path / "bare")
    folder = package_folder(tmp_path / "opt" / "jax-image")
    hidden = run(["env", "--python", str(python)], ws)
    assert hidden.returncode == 1 and "jax is not installed" in hidden.stdout  # without it: nowhere
    found = run(["env", "--python", str(python)], ws, PYTHONPATH=str(folder))
    assert found.returncode == 0, found.stdout + found.stderr
    assert "is ready" in found.stdout and "jax 0.10" in found.stdout
    traced = run(["trace", FUNCTION, "--python", str(python)], ws, PYTHONPATH=str(folder))
    assert traced.returncode == 0, traced.stderr
    assert f"with {python} (--python)" in traced.stdout and "f32[2]" in traced.stdout


def test_jax_in_the_user_site_is_found_where_the_interpreter_enables_one(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    user_site = home / ".local" / "lib" / PY / "site-packages"
    package_folder(user_site)
    with_site = bare_venv(tmp_path / "system", system_site=True)  # a user site, as site.py would add
    without = bare_venv(tmp_path / "isolated")  # a plain venv: no user site when the user runs it either
    base = run(["env", "--python", str(with_site)], ws)
    if base.returncode == 0:
        pytest.skip("the runner's base interpreter has jax itself: the user site cannot be told apart")
    found = run(["env", "--python", str(with_site)], ws, HOME=str(home))
    assert found.returncode == 0 and "is ready" in found.stdout, found.stdout + found.stderr
    traced = run(["trace", FUNCTION, "--python", str(with_site)], ws, HOME=str(home))
    assert traced.returncode == 0 and "f32[2]" in traced.stdout, traced.stderr
    assert "jax is not installed" in run(["env", "--python", str(without)], ws, HOME=str(home)).stdout
    off = run(["env", "--python", str(with_site)], ws, HOME=str(home), PYTHONNOUSERSITE="1")
    assert "jax is not installed" in off.stdout


@pytest.mark.parametrize("spelling", ["absolute", "relative", "current folder"])
def test_a_workspace_cannot_add_to_the_capture_path(ws: Path, tmp_path: Path, spelling: str) -> None:
    """A PYTHONPATH entry inside the workspace (or naming the current folder, which is the
    workspace) is not searched: its modules stay unimported, even when they would provide jax."""
    python = bare_venv(tmp_path / "bare")
    folder = package_folder(ws / "vendor")
    entry = {"absolute": str(folder), "relative": "vendor", "current folder": ""}[spelling]
    if spelling == "current folder":
        for item in folder.iterdir():
            (ws / item.name).symlink_to(item.resolve())
    result = run(["trace", FUNCTION, "--python", str(python)], ws, PYTHONPATH=f"{entry}:/nonexistent")
    assert result.returncode == 2
    assert "jax is not installed" in result.stderr
    assert not (ws / "IMPORTED").exists()
    assert "jax is not installed" in run(["env", "--python", str(python)], ws, PYTHONPATH=str(folder)).stdout


def test_tpu_is_refused_before_any_import_naming_the_backend_and_its_install(ws: Path) -> None:
    result = run(["trace", FUNCTION, "--device", "tpu:0"], ws)
    assert result.returncode == 2, result.stderr
    assert "device tpu:0 needs JAX's TPU backend (libtpu)" in result.stderr
    assert "has only the backends [cpu]" in result.stderr and "never falls back to the CPU" in result.stderr
    assert 'pip install "jax[tpu]"' in result.stderr
    assert not (ws / "IMPORTED").exists()
    text = (ws / "jaxlsp.toml").read_text()
    (ws / "jaxlsp.toml").write_text(text.replace("[profiles.predict]\n", '[profiles.predict]\ndevice = "tpu"\n'))
    profiled = run(["trace", FUNCTION, "--profile", "predict"], ws)
    assert profiled.returncode == 2 and "device tpu needs JAX's TPU backend" in profiled.stderr
    env = run(["env", "--device", "tpu"], ws)
    assert env.returncode == 1 and 'pip install "jax[tpu]"' in env.stdout
    unknown = run(["trace", FUNCTION, "--device", "tpu:01"], ws)
    assert unknown.returncode == 2 and "unknown device 'tpu:01'" in unknown.stderr
