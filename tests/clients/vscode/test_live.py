"""Live shapes in real VS Code (code-server), with the extension's default launch, on a copy of
``tests/workspaces/lsp_live`` opened trusted (workspace trust off, as in test_notebooks.py) and
``jaxlsp.liveShapes`` on (its default; the other VS Code tests turn it off).

One session, and no click on a lens or a trace command anywhere: opening ``model.py`` traces
``layer`` (its profile in ``jaxlsp.toml``) and the live status item says so; hover on a traced line
shows its shapes; a width broken in the editor and saved (Ctrl+S) brings the failure's diagnostic
into the Problems panel at the failing line, and the status item says it failed; the line fixed
and saved clears it and the item is fresh again. Screenshots of each step are in
build/test-artifacts/vscode/.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from tests.clients.vscode.conftest import Open, Workbench
from tests.clients.vscode.test_extension import status_item
from tests.deadlines import scaled

WORKSPACE = Path(__file__).resolve().parents[2] / "workspaces" / "lsp_live"
SETTINGS = {"security.workspace.trust.enabled": False, "jaxlsp.liveShapes": True}
HOVER_LINE = "h = x @ w"
WIDTH_LINE = "w = jnp.ones((x.shape[-1], WIDTH))"
BROKEN_LINE = "w = jnp.ones((x.shape[-1] + 1, WIDTH))"
TAIL = ", WIDTH))"  # what follows the first dimension on WIDTH_LINE
PROBLEMS = ".markers-panel .monaco-list-row"


async def hover(page: Workbench, line: str, want: str) -> str:
    """Hover the mouse over ``line``'s text (no click) and read the hover once it shows ``want``."""
    # x = 70 px: inside the line's code (past its indentation), where a hover is asked for.
    await page.send("hover", selector=".monaco-editor .view-line", hasText=line, position={"x": 70, "y": 8})
    await page.wait_for(".monaco-hover .rendered-markdown", has_text=want, timeout=30)
    text = "\n".join(await page.texts(".monaco-hover .rendered-markdown"))
    await page.send("press", key="Escape")
    return text


async def save(page: Workbench, file: Path, text: str, timeout: float = 30) -> None:
    """Ctrl+S in the editor, and the file on disk holds ``text`` (a deadline, not a pace)."""
    await page.send("press", key="Control+S")
    for _ in range(int(scaled(timeout) * 10)):
        if file.read_text() == text:
            return
        await asyncio.sleep(0.1)
    shot = await page.screenshot("not-saved")
    raise AssertionError(f"{file.name} was not saved as edited (screenshot: {shot}):\n{file.read_text()}")


async def jaxlsp_problems(page: Workbench) -> list[str]:
    return [t for t in await page.texts(PROBLEMS) if "jaxlsp" in t]


async def test_live_shapes_hover_without_a_click_a_broken_shape_on_save_and_its_fix(
    vscode: Open, tmp_path: Path
) -> None:
    root = Path(shutil.copytree(WORKSPACE, tmp_path / "lsp_live")).resolve()
    source = (root / "model.py").read_text()
    width_line = next(i for i, text in enumerate(source.splitlines()) if text.strip() == WIDTH_LINE) + 1
    hover_line = next(i for i, text in enumerate(source.splitlines()) if text.strip() == HOVER_LINE) + 1
    server, page = await vscode(root, SETTINGS, (1600, 1000))
    await page.command("View: Toggle Primary Side Bar Visibility")
    await page.quick_open("model.py")

    # 1. Opening the file is all it takes: the live item says `layer` is fresh once its live
    # trace finished, and hover shows the shapes, marked fresh.
    await status_item(page, "live: 1 fresh", timeout=240)
    shown = await hover(page, HOVER_LINE, "f32[4,16]")
    assert shown.lstrip().startswith("jaxlsp") and "fresh" in shown, shown
    assert "`dot_general` → `f32[4,16]`" in shown or "dot_general → f32[4,16]" in shown, shown
    await page.screenshot("live-hover")

    # 2. Break the width (one more row than x has columns) and save: the failure's diagnostic,
    # source jaxlsp, code trace, at the matmul's line, in the Problems panel.
    await page.click(".monaco-editor .view-line", has_text=WIDTH_LINE)
    await page.send("press", key="End")
    for _ in TAIL:
        await page.send("press", key="ArrowLeft")
    await page.send("type", text=" + 1")
    await page.wait_for(".monaco-editor .view-line", has_text=BROKEN_LINE, timeout=10)
    await save(page, root / "model.py", source.replace(WIDTH_LINE, BROKEN_LINE))
    await page.send("press", key="Control+Shift+M")  # View: Problems
    await page.wait_for(PROBLEMS, has_text="jaxlsp", timeout=240)
    # A row's text: the message, then the source and code, then the position.
    (problem,) = await jaxlsp_problems(page)
    assert f"jaxlsptrace[Ln {hover_line}, Col" in problem, problem
    assert problem.startswith("tracing layer failed (trace): TypeError: dot_general"), problem
    assert "got (8,) and (9,)" in problem, problem
    failed = await status_item(page, "live: 1 failed", timeout=60)
    assert "fresh" not in failed, failed
    await page.screenshot("live-broken")

    # 3. Fix it and save: the diagnostic goes, the item is fresh again, hover still has the shapes.
    await page.click(".monaco-editor .view-line", has_text=BROKEN_LINE)
    await page.send("press", key="End")
    for _ in TAIL:
        await page.send("press", key="ArrowLeft")
    for _ in " + 1":
        await page.send("press", key="Backspace")
    await page.wait_for(".monaco-editor .view-line", has_text=WIDTH_LINE, timeout=10)
    await save(page, root / "model.py", source)
    await page.wait(
        f"![...document.querySelectorAll({PROBLEMS!r})].some((r) => r.textContent.includes('jaxlsp'))",
        timeout=240,
    )
    await status_item(page, "live: 1 fresh", timeout=60)
    shown = await hover(page, HOVER_LINE, "f32[4,16]")
    assert "fresh" in shown, shown
    await page.screenshot("live-fixed")
    assert width_line < hover_line  # the broken line is not the one the failure points at
    assert "Cancel notification" not in server.extension_log()
