"""Acceptance: ``editors/emacs/jaxlsp.el`` with eglot 1.9 in Emacs batch mode against the real server.

``emacs_client.el`` loads Debian's ``elpa-eglot``, calls ``jaxlsp-setup`` and starts eglot from
``eglot-server-programs`` (``jaxlsp serve`` from PATH). eglot has no lenses: the "Trace graph"
code action runs the package's trace, ``jaxlsp-outline`` pages the graph through ``jaxlsp/graph``
and RET on a node jumps to its source (eglot takes no ``window/showDocument``: the package jumps
from the ``location``), hover shows shapes, ``jaxlsp-node-at-point`` and ``jaxlsp-open-graph``
work, and missing inputs are read from the minibuffer. A second run checks that the package never
trusts on its own. Without emacs the tests fail under CI (``make test`` installs ``emacs-nox`` and
``elpa-eglot``) and skip elsewhere.
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

import pytest

from tests.clients.conftest import (
    graph_url_ok,
    line_of,
    make_hostile,
    missing_tool,
    run_editor,
    sentinels,
    with_venv_on_path,
)
from tests.deadlines import scaled

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PACKAGE = REPO / "editors" / "emacs"
WORKSPACES = HERE.parent / "workspaces"
SCRIPT = HERE / "emacs_client.el"
EGLOT = Path("/usr/share/emacs/site-lisp/elpa/eglot-1.9")
# scaled inside run_editor: seconds on the reference machine
TIMEOUT = 180  # seconds for a whole Emacs run: a deadline, not a pace


@pytest.fixture
def emacs() -> str:
    found = shutil.which("emacs")
    missing = "emacs (Debian emacs-nox)" if found is None else None
    if found is not None and not EGLOT.is_dir():
        missing = f"eglot 1.9 at {EGLOT} (Debian elpa-eglot)"
    if missing:
        missing_tool(f"{missing} not installed: make system-deps installs it")
    assert found is not None
    return found


class Run:
    """One ``emacs --batch`` run of ``emacs_client.el`` in ``mode`` on a fresh workspace copy."""

    def __init__(self, emacs: str, tmp_path: Path, mode: str) -> None:
        self.tmp = tmp_path
        self.root = Path(shutil.copytree(WORKSPACES / "lsp_trace", tmp_path / "lsp_trace")).resolve()
        if mode == "hostile":
            make_hostile(self.root)
        self.model = self.root / "model.py"
        source = self.model.read_text()
        config = {
            "python": sys.executable,
            "plugin": str(PACKAGE),
            "root": str(self.root),
            "file": str(self.model),
            "mode": mode,
            "predict_def_line": line_of(source, "def predict("),
            "needs_line": line_of(source, "def needs("),
            "report": str(tmp_path / "report.json"),
        }
        config_path = tmp_path / "emacs-config.json"
        config_path.write_text(json.dumps(config))
        home = tmp_path / "home"
        home.mkdir()
        env = with_venv_on_path(
            {
                **os.environ,
                "JAXLSP_EMACS_CONFIG": str(config_path),
                "HOME": str(home),  # no ~/.emacs.d, no package state from the machine's user
                "XDG_CONFIG_HOME": str(tmp_path / "xdg" / "config"),
                "XDG_CACHE_HOME": str(tmp_path / "xdg" / "cache"),
            }
        )
        self.proc, self.report = run_editor(
            [emacs, "--batch", "-Q", "-l", str(SCRIPT)], self.root, env, tmp_path / "report.json", TIMEOUT
        )

    def why(self) -> str:
        return (
            f"emacs exit {self.proc.returncode}\nreport: {json.dumps(self.report, indent=1, ensure_ascii=False)[:6000]}\n"
            f"stdout: {self.proc.stdout[-1500:]}\nstderr: {self.proc.stderr[-3000:]}"
        )


def test_eglot_code_action_trace_outline_reveal_hover(emacs: str, tmp_path: Path) -> None:
    run = Run(emacs, tmp_path, "full")
    report, why = run.report, run.why()
    assert report, f"emacs wrote no report\n{why}"
    assert report["ok"] is True and run.proc.returncode == 0, why
    assert report["server_class"] == "jaxlsp-server" and report["registered"] is True, why  # jaxlsp-setup
    assert report["init_options"] == {"jaxlsp": {"trusted": True, "liveShapes": False}}, why

    # eglot has no lenses: the code action on the def line is the way in.
    assert "Trace graph: predict" in report["actions"], why
    assert "Open graph: predict" not in report["actions"], why  # nothing traced yet
    # After the trace the "Open graph" code action opens the viewer through browse-url.
    assert "Open graph: predict" in report["actions_after"], why
    assert len(report["opened_by_action"]) == 1 and graph_url_ok(report["opened_by_action"][0]), why
    trace = report["trace"]
    assert trace["name"] == "predict" and trace["traceId"] and trace["outputs"] == ["f32[2]"], why
    assert not [p for p in report["prompts"] if "Trust" in p], why
    assert (run.root / "IMPORTED").exists()

    # jaxlsp-outline through jaxlsp/graph: the jit region (the call inside it), expanded by RET.
    assert report["outline_mode"] == "jaxlsp-outline-mode", why
    top = report["outline_top"][2:]
    assert len(top) == 1 and top[0].startswith("▸ jit"), why
    assert any(" jit → f32[2]" in line for line in report["outline_expanded"]), why
    dot = [line for line in report["outline_expanded"] if "dot_general" in line]
    assert len(dot) == 1 and "dot_general → f32[2,4]" in dot[0] and "model.py:12" in dot[0], why

    # RET on the node: point on the node's own source line in model.py, the outline still shown.
    source = run.model.read_text()
    assert report["node_source_line"] == line_of(source, "    h = jnp.tanh(x @ w)") + 1, why
    assert report["reveal_line"] == report["node_source_line"], why
    assert report["reveal_in_source"] is True and report["outline_visible"] is True, why

    assert "`dot_general` → `f32[2,4]`" in report["hover"] and "f32[" in report["hover"], why
    assert "n1 dot_general(f32[2,3], f32[3,4]) → f32[2,4]" in report["node_at"], why
    # M-x jaxlsp-learn-shapes reaches the server's jaxlsp.learnShapes (issue 46): a folder with no test
    assert report["learn_interactive"] is True, why
    assert report["learn_message"].startswith("jaxlsp: learning shapes: nothing to learn from"), why
    assert report["cursor_moved"] == 1 and report["cursor_hook"] is True, why
    assert report["opened"] == [report["graph_url"]] and graph_url_ok(report["graph_url"]), why

    # needs(x: jax.Array): the shape read from the minibuffer as typed; "1.5" is refused by the
    # server and read again with its message, then "3" (the server's [3]) is saved to jaxlsp.toml.
    shape_prompts = [p for p in report["prompts"] if "shape of x" in p]
    assert len(shape_prompts) == 2, why
    assert '"1.5" is neither a positive integer nor a dimension name' in shape_prompts[1], why
    assert any("save the profile for needs" in p for p in report["prompts"]), why
    assert report["needs_error"] is None and report["needs_trace"]["outputs"] == ["f32[3]"], why
    recipe = tomllib.loads((run.root / "jaxlsp.toml").read_text())
    assert recipe["profiles"]["needs"]["target"] == "model.py::needs", why


def test_eglot_package_never_trusts_on_its_own(emacs: str, tmp_path: Path) -> None:
    run = Run(emacs, tmp_path, "trust")
    report, why = run.report, run.why()
    assert report, f"emacs wrote no report\n{why}"
    assert report["ok"] is True and run.proc.returncode == 0, why
    assert report["init_options"] == {"jaxlsp": {}}, why
    assert report["server_class"] == "jaxlsp-server" and report["registered"] is None, why  # jaxlsp-start
    assert [p for p in report["prompts"] if "Trust" in p], why  # the server asked, through eglot
    assert "not trusted" in report["trace_error"], why
    assert not (run.root / "IMPORTED").exists()


def test_eglot_package_runs_nothing_of_a_hostile_project(emacs: str, tmp_path: Path) -> None:
    """eglot starts servers in the project's root, which here shadows ``jaxlsp``, ``lsprotocol``,
    ``cattrs`` and ``pygls`` and holds a recording ``.venv``: ``python -m jaxlsp serve`` runs with
    ``-I`` (the trace action is offered, nothing ran), and the project's own ``.venv/bin/jaxlsp``
    is refused before trust."""
    run = Run(emacs, tmp_path, "hostile")
    report, why = run.report, run.why()
    assert report, f"emacs wrote no report\n{why}"
    assert report["ok"] is True and run.proc.returncode == 0, why
    assert report["command"] == [sys.executable, "-I", "-m", "jaxlsp", "serve"], why
    assert "Trace graph: predict" in report["actions"], why
    assert "not started for" in report["refused"] and ".venv/bin/jaxlsp" in report["refused"], why
    assert report["servers_after"] == 0, why
    assert sentinels(run.root) == [], why


PAGE_CHECK = """
(setq package-directory-list (list "/usr/share/emacs/site-lisp/elpa"))
(package-initialize)
(require 'eglot)
(with-temp-buffer
  (insert (getenv "JAXLSP_PAGE_SNIPPETS"))
  (goto-char (point-min))
  (condition-case nil
      (while t (eval (read (current-buffer)) t))
    (end-of-file nil)))
(princ (json-encode
        (list (cons "registered" (and (rassq #'jaxlsp-contact eglot-server-programs) t))
              (cons "modes" (car (rassq #'jaxlsp-contact eglot-server-programs)))
              (cons "ensure" (and (memq #'eglot-ensure python-mode-hook) t)))))
"""


def test_readme_elisp_runs(emacs: str, tmp_path: Path) -> None:
    """The page's init snippet, evaluated as written: it loads the package and registers it."""
    page = (PACKAGE / "README.md").read_text(encoding="utf-8")
    blocks = [textwrap.dedent(t) for t in re.findall(r"^ *```elisp\n(.*?)^ *```", page, flags=re.M | re.S)]
    assert blocks
    script = tmp_path / "page.el"
    script.write_text(PAGE_CHECK)
    snippets = "\n".join(blocks).replace("/path/to/jaxlsp", str(REPO))
    proc = subprocess.run(
        [emacs, "--batch", "-Q", "-l", str(script)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        env={**os.environ, "JAXLSP_PAGE_SNIPPETS": snippets, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"registered": True, "modes": ["python-mode", "python-ts-mode"], "ensure": True}, proc.stderr
