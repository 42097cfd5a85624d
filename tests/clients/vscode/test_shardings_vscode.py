"""Shardings in real VS Code (code-server, issue 28): the MLP of ``tests/workspaces/mesh_recipe``,
sharded over a data-by-model mesh of 4 virtual CPU devices by its recipe alone (``mesh`` and
``sharding`` in jaxlsp.toml), traced from its lens once the workspace is trusted; hover on its
lines says the sharded types as JAX writes them (``f32[8@data,64@model]``) and the graph panel's
boxes carry them too. Screenshots of each step stay in
``build/test-artifacts/vscode/test_the_sharded_mlp_shows_its_shardings_in_hover_and_panel/``.
"""

from __future__ import annotations

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
