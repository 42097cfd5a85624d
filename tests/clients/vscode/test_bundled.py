"""Acceptance (issue 48 item 1): real VS Code (code-server) as a user who installed only the
``.vsix`` meets it. A clean profile, only ``build/jaxlsp.vsix`` installed, no ``jaxlsp`` on PATH
or in any interpreter (PATH holds the system's folders only, whose ``python3`` is 3.11 with nothing
of jaxlsp or JAX), and a workspace whose ``.venv`` has JAX and Flax but not jaxlsp (nor pygls,
lsprotocol, libcst, tomlkit).

The extension starts the server it carries (``bundled/``) with that ``python3``: the lens appears
in restricted mode, trusting restarts it, the lens traces in the workspace's ``.venv`` (the only
interpreter with JAX), hover shows shapes and the panel draws the graph. The first-run check finds
the ``.venv`` ready and says nothing. Screenshots of each step, the logs beside them, land in
``build/test-artifacts/vscode/test_only_the_vsix_.../``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.capture.environments.conftest import make_venv
from tests.clients.vscode.conftest import SYSTEM_PATH, Open
from tests.clients.vscode.test_extension import VIEWPORT, status_item, wait_log

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SERVER_PARTS = ("jaxlsp", "__editable__", "pygls", "lsprotocol", "libcst", "tomlkit")


def workspace(tmp: Path) -> Path:
    root = Path(shutil.copytree(EXAMPLES, tmp / "examples")).resolve()
    python = make_venv(root / ".venv", hide=SERVER_PARTS)
    probe = subprocess.run(
        [str(python), "-c", "import jax, flax\ntry:\n import jaxlsp\nexcept ImportError:\n print('ok')"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert probe.stdout.strip() == "ok", probe
    return root


def test_nothing_of_jaxlsp_is_installed_outside_the_vsix() -> None:
    """The premise: nothing on the system PATH runs jaxlsp, and its python3 can run the bundle."""
    assert shutil.which("jaxlsp", path=SYSTEM_PATH) is None
    python3 = shutil.which("python3", path=SYSTEM_PATH)
    assert python3 is not None
    probe = subprocess.run(
        [
            python3,
            "-I",
            "-c",
            "import sys, importlib.util as u; print(sys.version_info >= (3, 11), u.find_spec('jaxlsp'), u.find_spec('jax'))",
        ],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert probe.stdout.split() == ["True", "None", "None"], probe


async def test_only_the_vsix_lens_trust_trace_hover_panel(vscode: Open, tmp_path: Path) -> None:
    root = workspace(tmp_path)
    server, page = await vscode(root, None, VIEWPORT, venv_on_path=False)
    await page.command("View: Toggle Primary Side Bar Visibility")
    await page.quick_open("linen_cnn.py")

    # 1. The lens in restricted mode: the bundled server runs in python3 from the system's PATH.
    await page.wait_for(".statusbar-item", has_text="Restricted Mode")
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=120)
    await page.screenshot("bundled-lens")
    log = server.extension_log()
    assert "/bundled/tool/server.py in " in log and "(from bundled server, python3 on PATH; trusted: false)" in log, log
    assert str(root) not in log.split("starting", 1)[1].split("\n", 1)[0], log

    # 2. Trust (VS Code's own trust editor, from the refusal), then the lens traces in the .venv.
    await page.click(".codelens-decoration a", has_text="Trace graph")
    await page.click(".notifications-toasts .monaco-button", has_text="Manage Workspace Trust")
    await page.click('.workspace-trust-editor .monaco-button:text-is("Trust")')
    await wait_log(server, "trusted: true)")
    await wait_log(
        server,
        f"first-run check: The capture environment {root / '.venv' / 'bin' / 'python'} (workspace .venv) is ready",
    )
    await page.click(".tab", has_text="linen_cnn.py")
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=120)
    await page.click(".codelens-decoration a", has_text="Trace graph")
    done = await status_item(page, "CNN ·")
    assert done.endswith(" ops"), done

    # 3. The panel draws the graph.
    await page.wait("window.__jaxlsp && window.__jaxlsp.marks.firstPaint", frame="viewer", timeout=60)
    marks = await page.eval("JSON.parse(JSON.stringify(window.__jaxlsp.marks))", frame="viewer")
    assert marks["firstPaintTitles"] >= 3, marks
    title = await page.eval("document.querySelector('.jx-title').textContent", frame="viewer")
    assert title.endswith("linen_cnn.py::CNN"), title
    await page.screenshot("bundled-panel")

    # 4. Hover on a traced line: its shapes.
    await page.send(
        "hover", selector=".monaco-editor .view-line", hasText="nn.Conv(self.features", position={"x": 140, "y": 8}
    )
    await page.wait_for(".monaco-hover .rendered-markdown", has_text="f32[", timeout=30)
    hover = "\n".join(await page.texts(".monaco-hover .rendered-markdown"))
    assert "f32[4,28,28,32]" in hover, hover
    await page.screenshot("bundled-hover")

    # One message at most, and none about the environment: the .venv had what a trace needs.
    assert not [m for m in await page.notifications() if "cannot trace" in m or "could not start" in m]
