"""A 50,000-equation model end to end (issue 29): traced by the real server through the capture
worker, served by its loopback bridge, shown by the viewer in headless Chromium: the 32 layers
are one roll-up box at first sight, one layer expands to its two sub-modules, search finds a node
deep inside and brings it into view, and the hover on a source line still answers."""

from __future__ import annotations

from lsprotocol import types

from tests.deadlines import scaled
from tests.server.conftest import JaxClient, trusted_session, within
from tests.viewer.conftest import Browser

large = trusted_session("large", "large")
# seconds on the reference machine for a page wait on a 50,000-equation graph (browser.wait scales it)
PAGE_WAIT = 60


async def test_a_50k_equation_model_in_the_viewer(large: JaxClient, browser: Browser) -> None:
    client = large
    uri = client.uri("model.py")
    params = {"textDocument": {"uri": uri}, "name": "Decoder", "profile": "decoder"}
    # A cold capture of 50,000 equations on a busy machine: a deadline, scaled inside within().
    result = client.plain(await within(client.protocol.send_request_async("jaxlsp/trace", params), 600))
    assert "traceId" in result, result
    assert result["summary"]["ops"] >= 49_000, result["summary"]
    opened = await client.request("jaxlsp/openGraph", {"traceId": result["traceId"]})

    assert await browser.send("goto", url=opened["url"], timeout=scaled(120)) == 200
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstPaint", timeout=PAGE_WAIT * 2)
    # Decoder opens by itself (the only group); its 32 identical layers are one box.
    rollups = await browser.eval("[...document.querySelectorAll('.jx-rollup .jx-t1')].map(e => e.textContent)")
    assert rollups == ["layers_* \u00d732"], rollups
    drawn = int(await browser.eval("document.querySelector('.jx-canvas').dataset.items"))
    assert drawn < 10, f"{drawn} boxes drawn at first sight"

    # Search finds a layer inside the roll-up; choosing it unrolls the 32 and selects it; a double
    # click expands it, adding only its two sub-modules.
    await browser.send("type", selector=".jx-search", text="layers_7")
    await browser.wait("[...document.querySelectorAll('.jx-result')].some(e => e.textContent === 'module: layers_7')")
    await browser.eval(
        "[...document.querySelectorAll('.jx-result')].find(e => e.textContent === 'module: layers_7').click()"
    )
    layer = await browser.wait("document.querySelector('.jx-selected.jx-group')?.dataset.id", timeout=PAGE_WAIT)
    assert int(await browser.eval("document.querySelector('.jx-canvas').dataset.items")) >= 34
    await browser.send("dblclick", selector=f".jx-group[data-id={layer}]")
    await browser.wait(f"!!document.querySelector('.jx-container[data-id={layer}]')", timeout=PAGE_WAIT)
    # (boxes are drawn side by side, not nested in the DOM: the titles of closed groups)
    titles = await browser.wait(
        "(() => { const t = [...document.querySelectorAll('.jx-group .jx-t1')].map(e => e.textContent);"
        " return t.includes('attn') && t.includes('mlp') && t; })()",
        timeout=PAGE_WAIT,
    )
    assert titles.count("attn") == 1 and titles.count("mlp") == 1, titles
    await browser.send("type", selector=".jx-search", text="")

    # Search reaches every node: the sub in layers_31's mlp, the last module of the program.
    await browser.send("type", selector=".jx-search", text="layers_31/mlp")
    count = await browser.wait("document.querySelectorAll('.jx-result').length", timeout=PAGE_WAIT)
    assert count > 0
    await browser.send("click", selector=".jx-result")
    await browser.wait("!!document.querySelector('.jx-selected.jx-op')", timeout=PAGE_WAIT)

    # The server still answers hover on a source line of the big graph.
    hover = await client.within(
        client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(18, 18)))
    )
    assert hover is not None and "f32[4,16]" in str(hover.contents), hover
