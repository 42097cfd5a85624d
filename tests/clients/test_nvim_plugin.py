"""Acceptance: the Neovim plugin (``editors/nvim``) in headless Neovim 0.11 against the real server.

``nvim_plugin.lua`` puts the plugin on the runtimepath and calls only ``require("jaxlsp").setup``:
the client starts from the default command ``jaxlsp serve`` found on PATH (the venv's ``bin``),
the plugin refreshes the lenses, the lens runs the plugin's trace, ``:JaxOutline`` pages the graph
through ``jaxlsp/graph`` and ``<CR>`` on a node reveals its source, hover shows shapes,
``:JaxNodeAt``, ``:JaxGraph`` and ``:JaxTrace`` with a needs-input prompt work. A second run checks
that the plugin never trusts on its own: the server asks, and "Cancel" runs nothing. Each run
writes a JSON report this test asserts on. Without nvim the test fails under CI and skips elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from tests.clients.conftest import (
    graph_url_ok,
    line_of,
    luafile_command,
    make_hostile,
    nvim_failure,
    run_editor,
    sentinels,
    with_venv_on_path,
)
from tests.deadlines import scaled

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PLUGIN = REPO / "editors" / "nvim"
WORKSPACES = HERE.parent / "workspaces"
SCRIPT = HERE / "nvim_plugin.lua"
# scaled inside run_editor: seconds on the reference machine
TIMEOUT = 180  # seconds for a whole nvim run: a deadline, not a pace


class Run:
    """One headless nvim run of ``nvim_plugin.lua`` in ``mode`` on a fresh workspace copy."""

    def __init__(self, nvim: str, tmp_path: Path, mode: str) -> None:
        self.tmp = tmp_path
        self.root = Path(shutil.copytree(WORKSPACES / "lsp_trace", tmp_path / "lsp_trace")).resolve()
        if mode == "hostile":
            make_hostile(self.root)
            (self.root / "other.py").write_text("import jax\n\n\n@jax.jit\ndef other(x):\n    return x\n")
        self.model = self.root / "model.py"
        source = self.model.read_text()
        xdg = {kind: tmp_path / "xdg" / kind for kind in ("state", "config", "cache", "data")}
        for path in xdg.values():
            path.mkdir(parents=True)
        config = {
            "plugin": str(PLUGIN),
            "root": str(self.root),
            "file": str(self.model),
            "mode": mode,
            "python": sys.executable,
            "predict_def_line": line_of(source, "def predict("),
            "needs_line": line_of(source, "def needs("),
            "report": str(tmp_path / "report.json"),
            "failure": str(tmp_path / "failure.txt"),
        }
        config_path = tmp_path / "nvim-config.json"
        config_path.write_text(json.dumps(config))
        env = with_venv_on_path(
            {
                **os.environ,
                "JAXLSP_NVIM_CONFIG": str(config_path),
                # Neovim's stdpaths and the server's trust store and exports: all inside tmp_path.
                **{f"XDG_{kind.upper()}_HOME": str(path) for kind, path in xdg.items()},
            }
        )
        self.proc, self.report = run_editor(
            luafile_command(nvim, SCRIPT), self.root, env, tmp_path / "report.json", TIMEOUT
        )

    def why(self) -> str:
        return nvim_failure(self.proc, self.report, self.tmp)


def test_plugin_lens_trace_outline_reveal_hover(nvim: str, tmp_path: Path) -> None:
    run = Run(nvim, tmp_path, "full")
    report, why = run.report, run.why()
    assert report, f"nvim wrote no report\n{why}"
    assert report["ok"] is True and run.proc.returncode == 0, why
    assert report["nvim"].startswith("0.11."), why
    assert report["clients_stopped"] is True, why

    # setup({trusted = {root}}) alone: the default command from PATH, rooted at jaxlsp.toml's folder,
    # trust passed because the folder is in the user's list.
    assert report["cmd"] == ["jaxlsp", "serve"], why
    assert Path(report["root_dir"]) == run.root, why
    assert report["init_options"] == {"jaxlsp": {"trusted": True, "liveShapes": False}}, why
    assert report["offset_encoding"] == "utf-8", why

    # The plugin refreshed the lenses on open (the script never asked), then after the trace.
    source = run.model.read_text()
    predict_line = line_of(source, "def predict(")
    assert [lens["title"] for lens in report["lenses"] if lens["line"] == predict_line] == ["Trace graph"], why
    after = [lens["title"] for lens in report["lenses_after"] if lens["line"] == predict_line]
    assert len(after) == 3 and after[0].startswith("Trace graph · ") and "ops · f32[2]" in after[0], why
    assert after[1:] == ["Open graph", "Trace with values"], why  # the traced entrypoint's other lenses

    assert report["completion"] == ["predict", "needs"], why  # :JaxTrace <Tab>
    assert report["learn_command"] is True, why  # :JaxLearn runs jaxlsp.learnShapes (issue 46)

    # The lens ran the plugin's trace: a fresh graph, no trust prompt, user code really ran.
    trace = report["trace"]
    assert trace["name"] == "predict" and trace["traceId"], why
    assert trace["summary"]["outputs"] == ["f32[2]"], why
    assert not [s for s in report["selects"] if "Trust" in (s["prompt"] or "")], why
    assert (run.root / "IMPORTED").exists()

    # :JaxOutline through jaxlsp/graph: the jit region collapsed (the call inside it), expanded by <CR>.
    assert report["outline_filetype"] == "jaxlsp-outline", why
    top = report["outline_top"][2:]
    assert len(top) == 1 and top[0].startswith("▸ jit"), why
    expanded = report["outline_expanded"]
    assert any(line.startswith("▾ jit") for line in expanded), why
    assert any(" jit → f32[2]" in line for line in expanded), why
    dot = [line for line in expanded if "dot_general" in line]
    assert len(dot) == 1 and "dot_general → f32[2,4]" in dot[0] and "model.py:12" in dot[0], why

    # <CR> on the node: the cursor lands on the node's own source line, once.
    node = report["node"]
    assert node["source"]["line"] == line_of(source, "    h = jnp.tanh(x @ w)") + 1, why
    reveal = report["reveal"]
    assert reveal["line"] == node["source"]["line"], why
    assert reveal["window_is_source"] is True and reveal["outline_open"] is True, why
    assert reveal["show_documents"] == 1, why  # the server's showDocument jumped; the plugin did not again

    hover = report["hover"]
    assert "`dot_general` → `f32[2,4]`" in hover and "f32[" in hover, why
    assert "dot_general(f32[2,3], f32[3,4]) → f32[2,4]" in report["node_at"], why
    assert report["cursor_moved"] == 1, why

    # :JaxGraph opened the graph once (the server's showDocument went through the plugin).
    assert len(report["graph_opens"]) == 1 and graph_url_ok(report["graph_opens"][0]), why

    # :JaxTrace in needs(x: jax.Array): the shape asked with vim.ui.input and sent as typed; the
    # server refuses "1.5" and it is asked again with the server's message; "3" (the server's [3])
    # traces, and, as chosen, the profile lands in jaxlsp.toml.
    first, again = report["inputs"]
    assert "shape of x" in first and "shape of x" in again, why
    assert '"1.5" is neither a positive integer nor a dimension name' in again, why
    assert [s["prompt"] for s in report["selects"]] == ["jaxlsp: save the profile for needs?"], why
    needs = report["needs_trace"]
    assert needs and needs["name"] == "needs" and needs["summary"]["outputs"] == ["f32[3]"], why
    recipe = tomllib.loads((run.root / "jaxlsp.toml").read_text())
    assert recipe["profiles"]["needs"]["target"] == "model.py::needs", why
    assert any("saved the profile to" in note["msg"] for note in report["needs_notes"]), why

    # :checkhealth jaxlsp found the server on PATH and the trusted client.
    health = "\n".join(report["health"])
    assert "OK server: " in health and "(jaxlsp " in health and "not on PATH" not in health, why
    assert "encoding utf-8, trusted true" in health, why


def test_plugin_never_trusts_on_its_own(nvim: str, tmp_path: Path) -> None:
    run = Run(nvim, tmp_path, "trust")
    report, why = run.report, run.why()
    assert report, f"nvim wrote no report\n{why}"
    assert report["ok"] is True and run.proc.returncode == 0, why
    # The buffer was Python before setup(): setup started the client for it, without trust.
    assert report["cmd"] == ["jaxlsp", "serve"], why
    assert report["init_options"] == {"jaxlsp": {}}, why
    (prompt,) = [s for s in report["selects"] if "Trust" in (s["prompt"] or "")]
    assert prompt["items"] == ["Trust once", "Always", "Cancel"], why
    assert "not trusted" in report["trace_error"], why
    assert not (run.root / "IMPORTED").exists()  # Cancel: no user code ran


def test_plugin_runs_nothing_of_a_hostile_workspace(nvim: str, tmp_path: Path) -> None:
    """The workspace shadows ``jaxlsp``, ``lsprotocol``, ``cattrs``, ``pygls`` and holds a ``.venv``
    whose programs record being run; Neovim itself runs in that folder. A user command
    ``python -m jaxlsp serve`` gets ``-I`` and a working folder outside the workspace: the lens
    shows and nothing ran. The workspace's own ``.venv/bin/jaxlsp`` is refused before trust."""
    run = Run(nvim, tmp_path, "hostile")
    report, why = run.report, run.why()
    assert report, f"nvim wrote no report\n{why}"
    assert report["ok"] is True and run.proc.returncode == 0, why
    assert report["cmd"] == [sys.executable, "-I", "-m", "jaxlsp", "serve"], why
    assert not Path(report["cmd_cwd"]).resolve().is_relative_to(run.root), why
    assert any(lens["title"] == "Trace graph" for lens in report["lenses"]), why
    assert report["refused"] == {str(run.root): str(run.root / ".venv" / "bin" / "jaxlsp")}, why
    assert report["clients_after"] == 0, why
    assert any("not started for" in note["msg"] for note in report["notes"]), why
    assert sentinels(run.root) == [], why


def test_vim_lsp_enable_alone_starts_the_plugin_client(nvim: str, tmp_path: Path) -> None:
    """``lsp/jaxlsp.lua``: ``vim.lsp.enable("jaxlsp")`` with no ``setup()`` starts the plugin's
    client with its defaults (the script from PATH, outside the workspace, no trust), refreshes
    the lenses and brings the :Jax* commands."""
    run = Run(nvim, tmp_path, "enable")
    report, why = run.report, run.why()
    assert report, f"nvim wrote no report\n{why}"
    assert report["ok"] is True and run.proc.returncode == 0, why
    assert report["cmd"] == ["jaxlsp", "serve"] and report["init_options"] == {"jaxlsp": {}}, why
    assert Path(report["root_dir"]) == run.root, why
    assert not Path(report["cmd_cwd"]).resolve().is_relative_to(run.root), why
    assert any(lens["title"] == "Trace graph" for lens in report["lenses"]), why
    assert report["commands"] is True, why


PAGE_CHECK = r"""
-- Runs every Lua block of editors/nvim/README.md: statements run, an expression (the lazy.nvim
-- spec) is evaluated and its config() called; then the documented defaults must be the plugin's.
local blocks, repo = vim.json.decode(arg[1]), arg[2]
local out = { ran = 0 }
for _, text in ipairs(blocks) do
  text = text:gsub("/path/to/jaxlsp", repo)
  local chunk = loadstring(text) or assert(loadstring("return " .. text))
  local value = chunk()
  if type(value) == "table" and type(value.config) == "function" then
    value.config({ dir = repo })
  end
  out.ran = out.ran + 1
  if text:find("setup%(%{\n") then
    local jaxlsp = require("jaxlsp")
    out.defaults_match = vim.deep_equal(jaxlsp.config, jaxlsp.defaults)
  end
end
out.commands = vim.fn.exists(":JaxOutline") == 2 and vim.fn.exists(":JaxNodeAt") == 2
io.stdout:write(vim.json.encode(out))
"""


def test_readme_lua_runs_and_lists_the_defaults(nvim: str, tmp_path: Path) -> None:
    page = (PLUGIN / "README.md").read_text(encoding="utf-8")
    blocks = _lua_blocks(page)
    script = tmp_path / "page.lua"
    script.write_text(PAGE_CHECK)
    proc = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-l", str(script), json.dumps(blocks), str(REPO)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"ran": len(blocks), "defaults_match": True, "commands": True}, (out, proc.stderr)


def _lua_blocks(page: str) -> list[str]:
    return [textwrap.dedent(t) for t in re.findall(r"^ *```lua\n(.*?)^ *```", page, flags=re.M | re.S)]


def test_plugin_live_shapes_hover_without_a_click_and_a_broken_shape_on_write(nvim: str, tmp_path: Path) -> None:
    root = Path(shutil.copytree(WORKSPACES / "lsp_live", tmp_path / "lsp_live")).resolve()
    model = root / "model.py"
    source = model.read_text()
    xdg = {kind: tmp_path / "xdg" / kind for kind in ("state", "config", "cache", "data")}
    for path in xdg.values():
        path.mkdir(parents=True)
    config = {
        "plugin": str(PLUGIN),
        "root": str(root),
        "file": str(model),
        "hover_line": line_of(source, "    h = x @ w"),
        "width_line": line_of(source, "    w = jnp.ones("),
        "report": str(tmp_path / "report.json"),
        "failure": str(tmp_path / "failure.txt"),
    }
    (tmp_path / "nvim-config.json").write_text(json.dumps(config))
    env = with_venv_on_path(
        {
            **os.environ,
            "JAXLSP_NVIM_CONFIG": str(tmp_path / "nvim-config.json"),
            **{f"XDG_{kind.upper()}_HOME": str(path) for kind, path in xdg.items()},
        }
    )
    proc, report = run_editor(
        luafile_command(nvim, HERE / "nvim_live.lua"), root, env, tmp_path / "report.json", 2 * TIMEOUT
    )
    why = nvim_failure(proc, report, tmp_path)
    assert report.get("ok") is True and proc.returncode == 0, why
    assert "`dot_general` → `f32[4,16]`" in report["hover"] and "fresh" in report["hover"], why
    (broken,) = report["broken"]
    assert broken["line"] == config["hover_line"] and broken["code"] == "trace", why
    assert report["fixed"] == [], why
