"""Jupyter notebooks in real VS Code's notebook editor (code-server, its built-in ipynb support),
with the extension: the lens in a cell traces the model defined there, hover on a traced line of
the cell shows its shapes, a click on a node in the graph panel reveals the cell, with the
notebook's cell selected and the source line in its editor, and an edit of the cell marks the graph
stale.

The folder is tests/workspaces/notebooks (``models.ipynb``: a Linen, an NNX, an Equinox module and
a function in cells, markdown, magics) with workspace trust off, so the extension starts trusted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.clients.vscode.conftest import Open
from tests.clients.vscode.test_extension import status_item

WORKSPACE = Path(__file__).resolve().parents[2] / "workspaces" / "notebooks"
VIEWPORT = (1650, 1200)  # tall enough for the notebook's first cells and the Linen class's whole cell


async def test_lens_in_a_cell_traces_hover_in_the_cell_and_reveal_selects_the_cell(
    vscode: Open, tmp_path: Path
) -> None:
    root = Path(shutil.copytree(WORKSPACE, tmp_path / "notebooks")).resolve()
    server, page = await vscode(root, {"security.workspace.trust.enabled": False}, VIEWPORT)
    await page.command("View: Toggle Primary Side Bar Visibility")
    await page.quick_open("models.ipynb")
    await page.wait_for(".notebook-editor .cell-list-container", timeout=60)

    # 1. The lens on the Linen class's cell (the notebook's first model), then the trace.
    await page.wait_for(".notebook-editor .codelens-decoration a", has_text="Trace graph", timeout=120)
    await page.screenshot("notebook-lens")
    await page.click(".notebook-editor .codelens-decoration a", has_text="Trace graph")
    done = await status_item(page, "Dense2 ·")
    assert done.endswith(" ops"), done
    await page.wait("window.__jaxlsp && window.__jaxlsp.marks.firstPaint", frame="viewer", timeout=60)
    title = await page.eval("document.querySelector('.jx-title').textContent", frame="viewer")
    assert title.endswith("models.ipynb::Dense2"), title
    await page.screenshot("notebook-traced")

    # 2. Hover on a traced line of the cell: the shapes it produced (the cursor in the cell first,
    # at its end, so that the notebook scrolls the whole cell into view).
    await page.click(".notebook-editor .monaco-editor .view-line", has_text="class Dense2")
    await page.send("press", key="Control+End")
    await page.send(
        "hover",
        selector=".notebook-editor .monaco-editor .view-line",
        hasText="h = nn.relu(nn.Dense(self.features)(x))",
        position={"x": 120, "y": 8},
    )
    await page.wait_for(".monaco-hover .rendered-markdown", has_text="f32[4,16]", timeout=30)
    hover = "\n".join(await page.texts(".monaco-hover .rendered-markdown"))
    assert hover.lstrip().startswith("jaxlsp") and "Dense2" in hover, hover
    await page.screenshot("notebook-hover")
    await page.send("press", key="Escape")

    # 3. A node of the cell, clicked in the panel: the notebook shows that cell, selected, with the
    # line selected in its editor.
    await page.click(".notebook-editor .monaco-editor .view-line", has_text="WIDTH = 16")  # another cell first
    await page.click("button", has_text="Expand all", frame="viewer")  # the class's ops are in its sub-modules
    await page.wait("document.querySelectorAll('g.jx-node').length > 8", frame="viewer", timeout=30)
    node = await page.eval(
        """(() => {
          const v = window.__jaxlsp;
          for (const g of document.querySelectorAll('g.jx-node')) {
            const n = v.model.nodes.get(g.dataset.id);
            // a click reveals the node's source, the user's own line (frames[0] of a Dense op is in flax)
            if (n && n.source && n.source.path.endsWith('models.ipynb') && n.source.cell === 5) return { id: n.id, source: n.source };
          }
          return null;
        })()""",
        frame="viewer",
    )
    assert node, "no node whose source is in the Dense2 cell is drawn"
    await page.click(f'g.jx-node[data-id="{node["id"]}"]', frame="viewer")
    await page.wait(
        f"document.querySelector('.jx-status').textContent === 'opened models.ipynb (a cell):{node['source']['line']}'",
        frame="viewer",
        timeout=30,
    )
    await page.wait_for(".notebook-editor .monaco-list-row.focused", has_text="class Dense2", timeout=30)
    await page.wait_for(".statusbar-item", has_text="Cell 6 of 12", timeout=30)  # VS Code counts from 1
    await page.screenshot("notebook-reveal")

    # 4. An edit of the traced cell marks the graph stale, in the panel and the status bar, exactly
    # as an edit of a traced file does (tests/clients/vscode/test_extension.py, step 7).
    assert not await page.eval("!!document.querySelector('.jx-banner-stale')", frame="viewer")
    await page.click(".notebook-editor .monaco-editor .view-line", has_text="return nn.Dense(3)(h)")
    await page.send("press", key="End")
    await page.send("type", text="  # edited")
    await page.wait("!!document.querySelector('.jx-banner-stale')", frame="viewer", timeout=30)
    await status_item(page, "Dense2 (stale)", timeout=30)
    await page.screenshot("notebook-stale")
    assert "Cancel notification" not in server.extension_log()
