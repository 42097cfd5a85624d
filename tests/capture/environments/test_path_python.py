"""Acceptance (issue 55 item 1): the ``python3`` on ``PATH`` whose user site has JAX and Flax.

A tool-style install: jaxlsp's own interpreter (a venv that links the runner's site-packages less
JAX, Flax and Equinox, with jaxlsp from this tree) has no JAX, the project has no ``.venv``, and
the ``python3`` first on ``PATH`` is the runner's base interpreter whose user site (under a HOME
of the test's own) links JAX and Flax. With no ``--python``, ``jaxlsp env`` and ``jaxlsp trace``
pick that ``python3``, say why, and say where JAX and Flax come from; a refusal of an interpreter
that lacks them names it instead of an install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from jaxlsp.capture.environment import interpreters
from tests.capture.environments.conftest import MAIN_SITE, copy_env_workspace, make_venv, site_of
from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[3]
LINEN = "linen_model.py::Tiny"
BASE = Path(getattr(sys, "_base_executable", sys.executable))
# Only what the capture needs from the runner's site-packages goes into the user site.
SERVER_PARTS = ("jaxlsp", "__editable__", "pygls", "lsprotocol", "libcst", "tomlkit", "cattrs", "_pytest", "pytest")
LIBRARIES = ("jax", "flax", "equinox", "optax", "orbax", "chex")


@pytest.fixture
def user(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """``(environment, tool python, PATH's python3)``: a HOME whose user site has JAX and Flax, a
    ``bin`` folder first on PATH with a ``python3`` that finds them there, and a tool interpreter
    without them."""
    if sys.prefix == sys.base_prefix or not BASE.is_file():
        pytest.skip("the suite runs in a venv over a base interpreter: its base has no JAX of its own")
    home = tmp_path / "home"
    user_site = home / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    user_site.mkdir(parents=True)
    for entry in MAIN_SITE.iterdir():
        if entry.name.lower().startswith(SERVER_PARTS) or entry.name in ("__pycache__", "distutils-precedence.pth"):
            continue
        (user_site / entry.name).symlink_to(entry)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python3 = bin_dir / "python3"
    # A wrapper, as a distribution's or a module system's python3 often is.
    python3.write_text(f'#!/bin/sh\nexec {BASE} "$@"\n')
    python3.chmod(0o755)
    tool = make_venv(tmp_path / "tool", hide=(*LIBRARIES, "jaxlsp", "__editable__"))
    (site_of(tmp_path / "tool") / "jaxlsp-tree.pth").write_text(f"{ROOT}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "CONDA", "PYTHON"))}
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    lacks = subprocess.run([str(tool), "-c", "import jax"], capture_output=True, env=env, check=False)
    assert lacks.returncode != 0, "the tool's interpreter must not have JAX"
    return env, tool, python3


def _jaxlsp(tool: Path, args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool), "-m", "jaxlsp", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )


def test_a_tool_install_traces_a_linen_model_with_the_python3_on_path(
    user: tuple[dict[str, str], Path, Path], tmp_path: Path
) -> None:
    env, tool, python3 = user
    ws = copy_env_workspace(tmp_path)
    user_site = Path(env["HOME"]) / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"

    checked = _jaxlsp(tool, ["env", "--kind", "linen", "--json"], ws, env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["python"] == str(python3) and report["route"] == "python3 on PATH", report
    assert report["why"].startswith(f"the python3 your shell runs ({python3}, first on PATH), which has JAX"), report
    assert report["sources"]["jax"].startswith(f"the user site {user_site}"), report
    assert report["sources"]["flax"].startswith(f"the user site {user_site}"), report

    text = _jaxlsp(tool, ["env", "--kind", "linen"], ws, env).stdout
    assert f"where: jax {report['packages']['jax']} from the user site {user_site}" in text, text
    assert f"flax {report['packages']['flax']} from the user site {user_site}" in text, text

    out = tmp_path / "tiny.json"
    traced = _jaxlsp(tool, ["trace", LINEN, "-o", str(out)], ws, env)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert f"with {python3} (python3 on PATH)" in traced.stdout, traced.stdout
    first = traced.stdout.splitlines()[0]  # said before the capture: which, why, where JAX came from
    assert first.startswith(f"interpreter: {python3}, the python3 your shell runs"), first
    assert f"jax {report['packages']['jax']} from the user site {user_site}" in first, first
    assert f"flax {report['packages']['flax']} from the user site {user_site}" in first, first
    graph = json.loads(out.read_text())
    assert graph["versions"]["jax"] and graph["versions"]["flax"], graph["versions"]


def test_a_refusal_names_the_python3_on_path_that_has_what_is_missing(
    user: tuple[dict[str, str], Path, Path], tmp_path: Path
) -> None:
    env, tool, python3 = user
    ws = copy_env_workspace(tmp_path)
    refused = _jaxlsp(tool, ["trace", LINEN, "--python", str(tool)], ws, env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{python3} (first on PATH) has jax " in refused.stderr, refused.stderr
    assert refused.stderr.count("(first on PATH) has") == 1, refused.stderr  # one fix naming all it has
    assert f"flax {metadata.version('flax')} from the user site" in refused.stderr, refused.stderr
    assert f"trace with --python {python3}" in refused.stderr, refused.stderr
    assert "install jax" not in refused.stderr and "install flax" not in refused.stderr, refused.stderr
    assert not (ws / "IMPORTED").exists()


def test_path_route_comes_after_the_projects_environment_and_before_the_servers_own(tmp_path: Path) -> None:
    bin_dir, ws = tmp_path / "bin", tmp_path / "ws"
    bin_dir.mkdir()
    ws.mkdir()
    (bin_dir / "python3").write_text("#!/bin/sh\n")
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": f"relative{os.pathsep}{ws}{os.pathsep}{bin_dir}"}
    asked: list[tuple[str, str | None]] = []

    def has(python: str, kind: str | None) -> bool:
        asked.append((python, kind))
        return True

    chosen = interpreters.select_interpreter(
        workspace_root=ws, environ=env, own="/own/python", kind="linen", path_check=has
    )
    assert chosen == interpreters.Selection(str(bin_dir / "python3"), interpreters.PATH_PYTHON3)
    assert asked == [(str(bin_dir / "python3"), "linen")]
    # Before trust nothing runs: the server's own, and nothing asked.
    asked.clear()
    chosen = interpreters.select_interpreter(
        workspace_root=ws, environ=env, own="/own/python", search_path=False, path_check=has
    )
    assert chosen.route == interpreters.OWN and not asked
    # A python3 inside the workspace (or on a relative entry) is never a candidate.
    (ws / "python3").write_text("#!/bin/sh\n")
    (ws / "python3").chmod(0o755)
    assert interpreters.path_candidates({"PATH": f"{ws}{os.pathsep}{bin_dir}"}, [ws]) == [
        (interpreters.PATH_PYTHON3, str(bin_dir / "python3"))
    ]
    # Without JAX there, the server's own; a project .venv wins over PATH.
    assert interpreters.select_interpreter(
        workspace_root=ws, environ=env, own="/own/python", path_check=lambda p, k: False
    ) == interpreters.Selection("/own/python", interpreters.OWN)
    make_venv(ws / ".venv")
    assert interpreters.select_interpreter(workspace_root=ws, environ=env, path_check=has).route == "workspace .venv"
