"""The CLI's interpreter routes, the check before any import, ``--device cuda:0`` and the size limits.

Each run is a real ``python -m jaxlsp`` in a copy of ``tests/workspaces/environments``, whose
modules write ``IMPORTED`` when imported: a refusal by the check leaves no such file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.environments.conftest import copy_env_workspace, make_venv
from tests.deadlines import scaled

LINEN = "linen_model.py::Tiny"
FUNCTION = "fn.py::predict"


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "VIRTUAL_ENV")}
    return subprocess.run(
        [sys.executable, "-m", "jaxlsp", *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return copy_env_workspace(tmp_path)


def _refused_for_flax(result: subprocess.CompletedProcess[str], python: Path, route: str, ws: Path) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"jaxlsp trace: refused: The capture environment {python} ({route}) cannot trace:")
    assert "flax is not installed (Flax Linen targets need it). Fix: install flax>=0.10" in result.stderr
    assert not (ws / "IMPORTED").exists()  # refused before anything of the target ran


@pytest.mark.parametrize("route", ["--python", "recipe python", "workspace .venv", "CONDA_PREFIX", "VIRTUAL_ENV"])
def test_each_route_selects_the_venv_without_flax_and_the_check_names_flax(
    route: str, ws: Path, tmp_path: Path
) -> None:
    python = make_venv(ws / ".venv" if route == "workspace .venv" else tmp_path / "noflax")
    args, env = ["trace", LINEN], {}
    if route == "--python":
        args += ["--python", str(python)]
    elif route == "recipe python":
        text = (ws / "jaxlsp.toml").read_text()
        (ws / "jaxlsp.toml").write_text(text.replace("[profiles.tiny]\n", f'[profiles.tiny]\npython = "{python}"\n'))
    elif route in ("CONDA_PREFIX", "VIRTUAL_ENV"):
        env[route] = str(python.parent.parent)
    _refused_for_flax(run(args, ws, **env), python, route, ws)


def test_the_request_wins_over_the_recipe_and_the_servers_own_runs_last(ws: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "noflax")
    text = (ws / "jaxlsp.toml").read_text()
    (ws / "jaxlsp.toml").write_text(text.replace("[profiles.tiny]\n", f'[profiles.tiny]\npython = "{python}"\n'))
    own = run(["trace", LINEN, "--python", sys.executable], ws)
    assert own.returncode == 0, own.stderr
    assert f"with {sys.executable} (--python)" in own.stdout and (ws / "IMPORTED").exists()
    (ws / "IMPORTED").unlink()
    result = run(["trace", FUNCTION], ws)
    assert result.returncode == 0, result.stderr
    assert f"with {sys.executable} (server's own interpreter)" in result.stdout


def test_a_profile_traced_where_everything_is_installed_never_runs_discovery(ws: Path) -> None:
    """The CLI looks the target's kind up with discovery (libcst: 1.5 s of a cold trace on the
    shared machine, before the worker starts) only when the check's verdict could depend on it;
    where flax is missing it still does, and names flax (the tests above)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "jaxlsp", "trace", LINEN],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (ws / "IMPORTED").exists() and "traced in" in result.stdout
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert "jaxlsp.capture.engine" in imported
    assert not {name for name in imported if name.split(".")[0] == "libcst"}
    assert not {name for name in imported if name.startswith("jaxlsp.discovery.")} - {"jaxlsp.discovery.roots"}


def test_a_function_traces_in_the_venv_without_flax(ws: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "noflax")
    result = run(["trace", FUNCTION, "--python", str(python)], ws)
    assert result.returncode == 0, result.stderr
    assert f"with {python} (--python)" in result.stdout and "f32[2]" in result.stdout


def test_cuda_is_refused_before_any_import_never_run_on_the_cpu(ws: Path) -> None:
    result = run(["trace", FUNCTION, "--device", "cuda:0"], ws)
    assert result.returncode == 2
    assert "device cuda:0 needs a CUDA build of jaxlib" in result.stderr
    assert "never falls back to the CPU" in result.stderr
    assert not (ws / "IMPORTED").exists()


def test_env_prints_the_report_and_the_install_command(ws: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "noflax")
    result = run(["env", "--python", str(python), "--kind", "linen"], ws)
    assert result.returncode == 1
    assert f"to install what is missing, run:\n  {python} -m pip install 'flax>=0.10'" in result.stdout
    assert run(["env", "--python", str(python)], ws).returncode == 0


@pytest.mark.parametrize(
    ("flag", "limit", "figure", "setting"),
    [
        ("--max-equations", "2", r"has 3 equations, over the limit of 2 per graph", "jaxlsp.limits.equations"),
        ("--max-values", "4", r"defines 5 values, over the limit of 4 per graph", "jaxlsp.limits.values"),
        (
            "--max-bytes",
            "1000",
            r"serializes to [\d,]+ bytes \([\d.]+ MiB\), over the limit of 1,000 bytes",
            "jaxlsp.limits.bytes",
        ),
    ],
)
def test_each_size_limit_refuses_with_its_figures(ws: Path, flag: str, limit: str, figure: str, setting: str) -> None:
    out = ws / "graph.json"
    result = run(["trace", FUNCTION, flag, limit, "-o", str(out)], ws)
    assert result.returncode == 2, result.stderr
    assert re.search(figure, result.stderr), result.stderr
    assert f"nothing was cut (a graph is never truncated). Raise the limit with the setting {setting}" in result.stderr
    assert f"or {flag} on the command line" in result.stderr
    assert not out.exists()
