"""JupyterLab 4 with jupyterlab-lsp and editors/jupyterlab (the labextension and the jupyter-lsp
spec that starts ``jaxlsp serve``), driven in headless Chromium: "Trace graph" from the cell
toolbar, the trust prompt answered in JupyterLab's dialog, the graph viewer's tab, then hover on a
traced line of the cell shows its shape.

Outside CI a missing browser, node package or JupyterLab install skips this test; under
``CI=true`` it fails it (``make jupyterlab`` installs what it needs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deadlines import Deadline, scaled

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("jupyterlab_trace.mjs")
WORKSPACE = ROOT / "tests" / "workspaces" / "notebooks"
CHROMIUM = os.environ.get("JAXLSP_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "build" / "test-artifacts" / "jupyterlab"
START = 90.0  # seconds on the reference machine for the Jupyter server to answer: a deadline, not a pace


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (make system-deps installs Debian's chromium)"
    if not (ROOT / "editors" / "web" / "node_modules" / "playwright-core").is_dir():
        return "editors/web/node_modules is missing (make viewer runs npm ci)"
    for module in ("jupyterlab", "jupyterlab_lsp", "jupyter_lsp", "jaxlsp_jupyterlab"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (make jupyterlab installs it)"
    return None


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the JupyterLab test needs its tools under CI: {reason}")
        pytest.skip(reason)
    root = tmp_path / "notebooks"
    shutil.copytree(WORKSPACE, root)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "XDG_CONFIG_HOME": str(home / "xdg-config"),  # jaxlsp's trust store: never the user's
        "XDG_CACHE_HOME": str(home / "xdg-cache"),
    }
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = os.urandom(16).hex()
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
        f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={home / 'settings'}", f"--LabApp.workspaces_dir={home / 'workspaces'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    log = (tmp_path / "jupyter.log").open("w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = Deadline(START)
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=scaled(5)) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if process.poll() is not None or deadline.expired():
            log.close()
            pytest.fail(f"jupyter lab did not start:\n{(tmp_path / 'jupyter.log').read_text()[-4000:]}")
        time.sleep(0.25)  # polling for the server to listen; nothing is timed
    try:
        yield f"{base}/lab/tree/models.ipynb?token={token}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def test_trace_graph_from_the_cell_toolbar_then_hover_shows_the_shape(lab: str, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # cell 5 defines the Linen Dense2; its line 5 is ``h = nn.relu(nn.Dense(self.features)(x))``
    run = subprocess.run(
        ["node", str(SCRIPT), lab, "5", "5", "f32[4,16]", str(ARTIFACTS)],
        capture_output=True,
        text=True,
        timeout=scaled(400),
        check=False,
    )
    lines = run.stdout.strip().splitlines()
    assert lines, f"the browser script printed nothing: {run.stderr[-3000:]}"
    result = json.loads(lines[-1])
    log = (tmp_path / "jupyter.log").read_text()[-3000:]
    assert result["ok"], f"{result}\n--- jupyter log ---\n{log}"
    assert result["steps"][-4:] == ["trusted once", "viewer tab: loopback", "viewer page loaded", "hovered"]
    assert "jaxlsp" in result["hover"] and "Dense2" in result["hover"] and "dot_general" in result["hover"]


def test_the_jupyter_lsp_spec_starts_jaxlsp_serve_for_python(tmp_path: Path) -> None:
    path = ROOT / "editors" / "jupyterlab" / "jaxlsp_jupyterlab" / "spec.py"
    loaded = importlib.util.spec_from_file_location("jaxlsp_jupyterlab_spec", path)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    spec = module.jaxlsp(None)["jaxlsp"]
    assert spec["argv"] == [
        sys.executable,
        "-I",
        "-m",
        "jaxlsp",
        "serve",
    ]  # -I: the notebooks' folder is not on sys.path
    assert spec["languages"] == ["python"] and spec["requires_documents_on_disk"] is False
    decoy = tmp_path / "jaxlsp"  # a notebooks folder with a package of the server's name
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the folder ran inside the server')\n")
    shown = subprocess.run(
        [*spec["argv"], "--help"], capture_output=True, text=True, timeout=scaled(60), check=False, cwd=tmp_path
    )
    assert shown.returncode == 0 and "--stdio" in shown.stdout, shown.stderr
