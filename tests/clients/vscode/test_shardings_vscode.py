"""Shardings in real VS Code (code-server, issue 28): the MLP of ``tests/workspaces/mesh_recipe``,
sharded over a data-by-model mesh of 4 virtual CPU devices by its recipe alone (``mesh`` and
``sharding`` in jaxlsp.toml), traced from its lens once the workspace is trusted; hover on its
lines says the sharded types as JAX writes them (``f32[8@data,64@model]``) and the graph panel's
boxes carry them too; a trace with measured time ("jaxlsp: Trace with measured time") gives the
panel's time overlay and the line's time in hover. Screenshots of each step stay in
``build/test-artifacts/vscode/test_the_sharded_mlp_shows_its_shardings_in_hover_and_panel/``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.clients.vscode.conftest import Open, Workbench
from tests.clients.vscode.test_extension import status_item, wait_log

WORKSPACE = Path(__file__).resolve().parents[2] / "workspaces" / "mesh_recipe"
VIEWPORT = (1650, 950)


async def hover_line(page: Workbench, text: str, shows: str) -> str:
    """Hover over the editor line showing ``text`` until the hover says ``shows``; its text."""
    await page.send("hover", selector=".monaco-editor .view-line", hasText=text, position={"x": 140, "y": 8})
    await page.wait_for(".monaco-hover .rendered-markdown", has_text=shows, timeout=30)
    await page.wait("getComputedStyle(document.querySelector('.monaco-hover')).opacity === '1'")  # faded in
    return "\n".join(await page.texts(".monaco-hover .rendered-markdown"))


async def test_the_sharded_mlp_shows_its_shardings_in_hover_and_panel(vscode: Open, tmp_path: Path) -> None:
    root = Path(shutil.copytree(WORKSPACE, tmp_path / "mesh_recipe")).resolve()
    server, page = await vscode(root, None, VIEWPORT)
    await page.command("View: Toggle Primary Side Bar Visibility")
    await page.quick_open("mlp.py")

    # Trust the workspace as a user does (the refusal's button, VS Code's trust editor), then trace.
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=120)
    await page.click(".codelens-decoration a", has_text="Trace graph")
    await page.click(".notifications-toasts .monaco-button", has_text="Manage Workspace Trust")
    await page.click('.workspace-trust-editor .monaco-button:text-is("Trust")')
    await wait_log(server, "trusted: true)")
    await page.click(".tab", has_text="mlp.py")
    await page.wait_for(".codelens-decoration a", has_text="Trace graph", timeout=120)
    await page.click(".codelens-decoration a", has_text="Trace graph")
    done = await status_item(page, "mlp ·")
    assert done.endswith(" ops"), done

    # Hover: the hidden layer split over both axes, the output over data only.
    hidden = await hover_line(page, "h = jnp.tanh(", "@model")
    assert "f32[8@data,64@model]" in hidden and "tanh" in hidden, hidden
    await page.screenshot("hover-sharding")
    await page.send("press", key="Escape")
    out = await hover_line(page, 'return h @ params["w2"]', "@data")
    assert "f32[8@data,4]" in out and "@model" not in out.split("f32[8@data,4]")[0].splitlines()[-1], out
    await page.send("press", key="Escape")

    # The panel: the mesh on the graph and the sharded types on the boxes.
    await page.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull", frame="viewer", timeout=60)
    boxes = " ".join(await page.texts("g.jx-node", frame="viewer"))
    assert "f32[8@data,64@model]" in boxes, boxes
    await page.screenshot("panel-shardings")

    # Measured time: the palette's "Trace with measured time" compiles and runs the program on the
    # 4 devices under the profiler; the panel follows the new trace, whose time overlay is offered.
    old = await page.eval("window.__jaxlsp.traceId", frame="viewer")
    await page.click(".monaco-editor .view-line", has_text="h = jnp.tanh(")  # the editor active again
    await page.command("jaxlsp: Trace with measured time")
    await page.wait(
        f"window.__jaxlsp.traceId && window.__jaxlsp.traceId !== {json.dumps(old)}", frame="viewer", timeout=180
    )
    await status_item(page, "mlp ·")
    await page.wait("window.__jaxlsp.marks.firstFull", frame="viewer", timeout=60)
    await page.wait("!document.querySelector('.jx-overlay option[value=time]').disabled", frame="viewer", timeout=30)
    await page.eval(  # as a user picks "Measured time" in the overlay menu
        "(() => { const s = document.querySelector('.jx-overlay'); s.value = 'time'; "
        "s.dispatchEvent(new Event('change')); })()",
        frame="viewer",
    )
    await page.wait("document.querySelector('.jx-canvas').dataset.overlay === 'time'", frame="viewer", timeout=30)
    badges = await page.eval("[...document.querySelectorAll('.jx-badge')].map(e => e.textContent)", frame="viewer")
    assert badges and all(" \u00b7 " in b and b.endswith("%") for b in badges), badges
    boxes = " ".join(await page.texts("g.jx-node", frame="viewer"))
    assert "f32[8@data,64@model]" in boxes, boxes  # the shardings stay beside the time
    await page.screenshot("panel-time-overlay")
    # ... and hover gives the line's measured time beside its sharded types.
    timed = await hover_line(page, "h = jnp.tanh(", "of the step")
    assert "f32[8@data,64@model]" in timed and "measured" in timed, timed
    await page.screenshot("hover-time")
