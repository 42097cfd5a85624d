"""The VS Code extension in real VS Code (code-server), as a new user meets it, on a copy of
``examples/`` (the Linen CNN) plus one function that needs input, with the extension's default
launch (the ``jaxlsp`` script on PATH).

One session, step by step (each step's screenshot is in build/test-artifacts/vscode/): the lens
appears; in restricted mode a click refuses with the trust message; trusting and clicking traces;
hover shows shapes (and no method name); the panel draws the graph at a readable size (node titles
>= 11 px on screen at first paint, in an 800 px wide panel); clicking a node selects its source
range and the panel says so; an edit marks the graph stale; the status bar re-traces, and the new
graph clears the old selection; a needs-input answer that does not parse is refused by the
server and asked again with its message; the panel follows VS Code's theme, under its CSP.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from tests.clients.vscode.conftest import CodeServer, Open, Workbench
from tests.deadlines import scaled

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# Two editor groups of 800 px each once the side bar is hidden (48 px of activity bar, sashes).
VIEWPORT = (1650, 950)
MIN_TITLE_PX = 11.0

NEEDS = '''"""A function whose input shape nobody wrote down: jaxlsp asks for it."""

import jax
import jax.numpy as jnp


def scale(x: jax.Array):
    return jnp.sin(x) * 2.0
'''

# The on-screen font size of the node titles the viewer drew (their font size times the zoom),
# and how many there are: ``g.jx-node`` boxes carry their title as the first ``text``.
TITLE_PX = """(() => {
  const sizes = [...document.querySelectorAll('g.jx-node')].map((g) => g.querySelector('text'))
    .filter((t) => t && t.getScreenCTM())
    .map((t) => t.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize));
  return { count: sizes.length, min: Math.min(...sizes), width: document.documentElement.clientWidth };
})()"""


def workspace(tmp: Path) -> Path:
    root = Path(shutil.copytree(EXAMPLES, tmp / "examples")).resolve()
    (root / "needs.py").write_text(NEEDS)
    return root


async def wait_log(server: CodeServer, text: str, timeout: float = 60) -> None:
    """The extension's output channel says ``text`` (a deadline, not a pace)."""
    for _ in range(int(timeout * 10)):
        if text in server.extension_log():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the extension never logged {text!r}:\n{server.extension_log()[-3000:]}")


async def status_item(page: Workbench, text: str, timeout: float = 180) -> str:
    await page.wait_for(".statusbar-item", has_text=text, timeout=timeout)
    return next(t for t in await page.status_items() if text in t)


async def open_editor_line(page: Workbench, text: str) -> None:
    """Click into the editor on the line that shows ``text``."""
    await page.click(".monaco-editor .view-line", has_text=text)


async def test_lens_trust_trace_hover_panel_reveal_stale_retrace_answers(vscode: Open, tmp_path: Path) -> None:
    root = workspace(tmp_path)
    server, page = await vscode(root, None, VIEWPORT)
    await page.command("View: Toggle Primary Side Bar Visibility")
    await page.quick_open("linen_cnn.py")

    # 1. The lens, in restricted mode (the server runs, discovery needs no trust).
    await page.wait_for(".statusbar-item", has_text="Restricted Mode")
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=120)
    await page.screenshot("lens")

    # 2. Restricted mode refuses to trace, with the trust message and the way to trust.
    await page.click(".codelens-decoration a", has_text="Trace graph")
    await page.wait_for(".notifications-toasts .notification-list-item-message", has_text="restricted mode")
    (message,) = [m for m in await page.notifications() if "restricted mode" in m]
    assert "tracing CNN runs this workspace's code" in message and "Trust the workspace to trace" in message
    await page.wait_for(".notifications-toasts .monaco-button", has_text="Manage Workspace Trust")
    await page.screenshot("restricted-refusal")
    assert not [t for t in await page.status_items() if t.startswith("CNN")], "nothing was traced"

    # 3. Trusting (VS Code's own trust editor) restarts the server trusted; the lens then traces.
    await page.click(".notifications-toasts .monaco-button", has_text="Manage Workspace Trust")
    await page.click('.workspace-trust-editor .monaco-button:text-is("Trust")')
    await wait_log(server, "trusted: true)")
    # the trusted server has started (its first-run check answered): on a loaded machine the lens
    # was clicked while the old one's text was still shown and the new server not yet up
    await wait_log(server, "first-run check", timeout=scaled(120))
    await page.click(".tab", has_text="linen_cnn.py")
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=120)
    await page.click(".codelens-decoration a", has_text="Trace graph")
    first = await status_item(page, "CNN ·")
    assert first.endswith(" ops"), first

    # 4. The panel draws the graph at a readable size from its first paint.
    await page.wait("window.__jaxlsp && window.__jaxlsp.marks.firstPaint", frame="viewer", timeout=60)
    marks = await page.eval("JSON.parse(JSON.stringify(window.__jaxlsp.marks))", frame="viewer")
    assert 770 <= marks["firstPaintWidth"] <= 830, f"the panel is {marks['firstPaintWidth']} px wide, not ~800"
    assert marks["firstPaintTitles"] >= 3, marks
    assert marks["firstPaintTitlePx"] >= MIN_TITLE_PX, (
        f"node titles at first paint: {marks['firstPaintTitlePx']:.1f} px"
    )
    await page.wait("window.__jaxlsp.marks.firstFull", frame="viewer")
    now = await page.eval(TITLE_PX, frame="viewer")
    assert now["count"] >= 3 and now["min"] >= MIN_TITLE_PX, now
    title = await page.eval("document.querySelector('.jx-title').textContent", frame="viewer")
    assert title.endswith("linen_cnn.py::CNN"), title
    await page.screenshot("panel-first-view")
    # The overlays' data (jaxlsp/costs) follows the graph: the memory overlay is offered.
    await page.wait("!document.querySelector('.jx-overlay option[value=memory]').disabled", frame="viewer", timeout=30)

    # 5. Hover on a traced line: its shapes; the first line names jaxlsp, no method name anywhere.
    await page.send(
        "hover", selector=".monaco-editor .view-line", hasText="nn.Conv(self.features", position={"x": 140, "y": 8}
    )
    await page.wait_for(".monaco-hover .rendered-markdown", has_text="f32[", timeout=30)
    hover = "\n".join(await page.texts(".monaco-hover .rendered-markdown"))
    assert hover.lstrip().startswith("jaxlsp"), hover
    assert "f32[4,28,28,32]" in hover and "jaxlsp/" not in hover, hover
    await page.wait("getComputedStyle(document.querySelector('.monaco-hover')).opacity === '1'")  # faded in
    await page.screenshot("hover")
    await page.send("press", key="Escape")

    # 6. A click on a node selects its source range in the editor, and the panel says it did.
    node = await page.eval(
        """(() => {
          const v = window.__jaxlsp;
          for (const g of document.querySelectorAll('g.jx-node')) {
            const n = v.model.nodes.get(g.dataset.id);
            if (n && n.source && n.source.path.endsWith('linen_cnn.py') && n.source.line === n.source.endLine)
              return { id: n.id, source: n.source };
          }
          return null;
        })()""",
        frame="viewer",
    )
    assert node, "no node with a one-line source in linen_cnn.py is drawn"
    await page.click(f'g.jx-node[data-id="{node["id"]}"]', frame="viewer")
    src = node["source"]
    selected = src["endColumn"] - src["column"]
    await status_item(page, f"Ln {src['endLine']}, Col {src['endColumn'] + 1} ({selected} selected)", timeout=30)
    await page.wait(
        f"document.querySelector('.jx-status').textContent === 'opened linen_cnn.py:{src['line']}'", frame="viewer"
    )
    await page.screenshot("reveal")

    # The editor's cursor on a traced line highlights its nodes in the panel.
    await open_editor_line(page, "return nn.Dense(self.classes)(x)")
    await page.wait("Number(document.querySelector('.jx-canvas').dataset.highlighted) > 0", frame="viewer", timeout=30)

    # 7. An edit of a traced file marks the graph stale, in the panel and the status bar.
    await open_editor_line(page, "return nn.Dense(self.classes)(x)")
    await page.send("press", key="End")
    await page.send("type", text="  # edited")
    await page.wait("!!document.querySelector('.jx-banner-stale')", frame="viewer", timeout=30)
    await status_item(page, "CNN (stale)", timeout=30)
    await page.screenshot("stale")

    # 8. Re-trace from the status bar: a fresh graph, and the old selection is gone with the old graph.
    old = await page.eval("window.__jaxlsp.traceId", frame="viewer")
    assert await page.eval("!!document.querySelector('.jx-details h3')", frame="viewer"), (
        "the clicked node was selected"
    )
    await page.click(".statusbar-item", has_text="CNN (stale)")
    await page.wait(
        f"window.__jaxlsp.traceId && window.__jaxlsp.traceId !== {json.dumps(old)}", frame="viewer", timeout=180
    )
    await status_item(page, "CNN ·")
    assert not await page.eval("!!document.querySelector('.jx-banner-stale')", frame="viewer")
    assert not await page.eval("!!document.querySelector('.jx-details h3')", frame="viewer"), "the old selection stayed"
    assert await page.eval("window.__jaxlsp.selected", frame="viewer") is None
    # ... with the changes since the first trace (jaxlsp/diff): a comment changes nothing.
    await page.wait("window.__jaxlsp.overlay && window.__jaxlsp.overlay.diff", frame="viewer", timeout=30)
    assert await page.eval("window.__jaxlsp.overlay.diff.summary", frame="viewer") == "no changes"
    await page.screenshot("retraced")

    # 9. Needs input: the typed text goes to the server, which parses it; a bad answer comes back
    # with the server's message and is asked again, prefilled.
    await page.quick_open("needs.py")
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=60)
    await page.click(".codelens-decoration a", has_text="Trace graph")
    await page.wait_for(".quick-input-widget", has_text="needs input")
    await page.send("type", text="1.5, 4")
    await page.send("press", key="Enter")
    await page.click(".notifications-toasts .monaco-button", has_text="Don't save")
    await page.wait_for(".quick-input-widget .quick-input-message", has_text="1.5", timeout=120)
    error = " ".join(await page.texts(".quick-input-widget .quick-input-message"))
    assert "positive integer" in error, error
    assert await page.eval("document.querySelector('.quick-input-widget input').value") == "1.5, 4"
    await page.screenshot("needs-input-error")
    await page.send("press", key="Control+A")
    await page.send("type", text="3, 4")
    await page.send("press", key="Enter")
    done = await status_item(page, "scale ·")
    assert done.endswith(" ops"), done
    assert not (root / "jaxlsp.toml").read_text().count("needs.py"), "Don't save wrote nothing"
    await page.screenshot("needs-input-traced")

    # 10. The panel follows VS Code's theme (Preferences: Color Theme, as a user picks it).
    assert await page.eval("document.querySelector('.jx-app').dataset.theme", frame="viewer") == "light"
    await page.command("Preferences: Color Theme")
    await page.send("type", text="Default Dark Modern")
    await page.click('.quick-input-list .monaco-list-row[aria-label*="Dark Modern"]')
    await page.wait("document.querySelector('.jx-app').dataset.theme === 'dark'", frame="viewer", timeout=30)
    await page.screenshot("dark-theme")
    # The panel's page ran under its Content-Security-Policy without a violation, and the server's
    # stderr (shown as errors in the extension's output) had no noise about routine cancels.
    logs: Any = await page.send("logs")
    assert not [line for line in logs if "Content Security Policy" in line], logs
    assert "Cancel notification" not in server.extension_log()
