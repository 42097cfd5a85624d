"""The graph viewer end to end: a real server traces a three-layer Linen model, ``jaxlsp/openGraph``
serves the viewer on its loopback bridge, headless Chromium shows it; clicks go back to the editor
as ``window/showDocument`` and the editor's cursor highlights nodes in the page.

Screenshots land in build/test-artifacts/viewer/.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lsprotocol import types

from jaxlsp.graph import io
from jaxlsp.graph.export import to_html
from tests.deadlines import scaled
from tests.graph.test_samples import chain_graph, small_graph
from tests.server.conftest import JaxClient
from tests.viewer.conftest import Browser, trace_stack

PNG = b"\x89PNG\r\n\x1a\n"


def _get(url: str, path: str, method: str = "GET", body: bytes | None = None, host: str | None = None) -> Any:
    """One request to the bridge: ``(status, headers, body bytes)``."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=scaled(10))
    headers = {"Host": host} if host else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), data


async def _call(f: Any, *args: Any, **kwargs: Any) -> Any:
    """A blocking HTTP call off the event loop, which also runs the server's client."""
    return await asyncio.to_thread(f, *args, **kwargs)


def _non_empty_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 5000, f"{path} is empty or not a PNG"


async def _open(client: JaxClient) -> tuple[str, str, str]:
    trace_id = await trace_stack(client)
    result = await client.request("jaxlsp/openGraph", {"traceId": trace_id})
    url = result["url"]
    return trace_id, url, parse_qs(urlsplit(url).query)["token"][0]


async def test_open_click_highlight_in_the_browser(traced: JaxClient, browser: Browser) -> None:
    client = traced
    trace_id, url, token = await _open(client)
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.hostname == "127.0.0.1" and len(token) >= 40
    assert parse_qs(parts.query)["trace"] == [trace_id]
    # VS Code supports showDocument: the page was also opened in the external browser.
    await client.wait_until(lambda: any(s.external and s.uri == url for s in client.shown))

    assert await browser.send("goto", url=url) == 200
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    # The model group opens by itself; its three identical layers are one roll-up box.
    rollups = await browser.eval("[...document.querySelectorAll('.jx-rollup .jx-t1')].map(e => e.textContent)")
    assert rollups == ["Layer_* \u00d73"]
    # Inputs are a box; the weights are listed inside the cards that use them (no edges).
    assert await browser.eval("[...document.querySelectorAll('.jx-ports .jx-t1')].map(e => e.textContent)") == [
        "inputs \u00d71"
    ]
    weights = await browser.eval("[...document.querySelectorAll('.jx-rollup .jx-param')].map(e => e.textContent)")
    assert weights == ["Dense_0/kernel f32[8,8]", "Dense_0/bias f32[8]"], weights
    labels = await browser.eval("[...document.querySelectorAll('.jx-edge-label')].map(e => e.textContent)")
    assert "f32[2,8]" in labels
    _non_empty_png(await browser.screenshot("stack-collapsed.png"))

    # Unroll, expand one layer, collapse it again.
    await browser.send("dblclick", selector=".jx-rollup")
    await browser.wait("document.querySelectorAll('.jx-group').length === 3 && !document.querySelector('.jx-rollup')")
    await browser.send("dblclick", selector="[data-id=g1]")
    await browser.wait("document.querySelector('.jx-container[data-id=g1]') && document.querySelector('[data-id=n3]')")
    assert await browser.eval("document.querySelector('[data-id=n3] .jx-t1').textContent") == "tanh"
    await browser.wait("document.querySelector('.jx-canvas').dataset.engine === 'elk'")
    await browser.send("click", selector=".jx-container[data-id=g1] > .jx-toggle")
    await browser.wait("!document.querySelector('[data-id=n3]') && document.querySelector('.jx-group[data-id=g1]')")

    # Search by op: three tanh; choosing one opens what hides it and selects it.
    await browser.send("type", selector=".jx-search", text="tanh")
    await browser.wait("document.querySelectorAll('.jx-result').length === 3")
    await browser.send("click", selector=".jx-result[data-id=n7]")
    await browser.wait("document.querySelector('.jx-selected[data-id=n7]')")
    # By shape and by scope too.
    await browser.send("type", selector=".jx-search", text="f32[2,8]")
    await browser.wait("document.querySelectorAll('.jx-result').length > 3")
    await browser.send("type", selector=".jx-search", text="Layer_2/Dense_0")
    assert await browser.wait("document.querySelectorAll('.jx-result').length") == 3
    await browser.send("type", selector=".jx-search", text="")

    # A click on a node puts the editor's cursor on its source line.
    shown = len(client.shown)
    await browser.send("click", selector=".jx-op[data-id=n7]")
    await client.wait_until(lambda: len(client.shown) > shown)
    reveal = client.shown[-1]
    assert reveal.uri == client.uri("model.py") and not reveal.external and reveal.take_focus
    line = (client.workspace / "model.py").read_text().splitlines()[10]
    assert reveal.selection is not None and reveal.selection.start.line == 10
    assert line[reveal.selection.start.character :].startswith("jnp.tanh(")
    await browser.wait("document.querySelector('.jx-status').textContent.startsWith('opened model.py:11')")
    # The details panel lists the frames; the second one goes to the call in Stack.
    await browser.send("click", selector=".jx-frame-link:nth-of-type(2)")
    await client.wait_until(lambda: len(client.shown) > shown + 1)
    second = client.shown[-1].selection
    assert second is not None and second.start.line == 17

    # The editor's cursor on the Layer line highlights its nodes: tanh and the Dense called there,
    # in each layer: the open layer's tanh and Dense_0, the collapsed layers as wholes.
    client.protocol.notify(
        "jaxlsp/cursorMoved",
        {"textDocument": {"uri": client.uri("model.py")}, "position": {"line": 10, "character": 20}},
    )
    await browser.wait("!!document.querySelector('.jx-highlight[data-id=n7]')")
    highlighted = await browser.eval("[...document.querySelectorAll('.jx-highlight')].map(e => e.dataset.id).sort()")
    assert highlighted == ["g1", "g4", "g5", "n7"]
    # A line without nodes clears it; hover pushes the same highlight.
    client.protocol.notify(
        "jaxlsp/cursorMoved", {"textDocument": {"uri": client.uri("model.py")}, "position": {"line": 0, "character": 0}}
    )
    await browser.wait("document.querySelector('.jx-canvas').dataset.highlighted === '0'")
    await client.within(
        client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(client.uri("model.py")), types.Position(18, 10))
        )
    )
    await browser.wait("!!document.querySelector('.jx-highlight[data-id=n12]')")

    # Expand all, keyboard, theme, exports.
    await browser.send("click", selector="[data-action=expand-all]")
    await browser.wait("document.querySelectorAll('.jx-op').length === 13 && !document.querySelector('.jx-group')")
    await browser.wait("document.querySelector('.jx-canvas').dataset.engine === 'elk'")
    _non_empty_png(await browser.screenshot("stack-expanded.png"))
    await browser.send("press", key="Escape")
    await browser.send("click", selector="[data-action=collapse-all]")
    await browser.wait("!document.querySelector('.jx-op[data-id=n0]') && !!document.querySelector('.jx-rollup')")
    await browser.send("press", key="ArrowRight")
    await browser.wait("!!document.querySelector('.jx-selected')")
    # Headless Chromium prefers light; "t" cycles auto -> light -> dark -> auto.
    themes = [await browser.eval("document.querySelector('.jx-app').dataset.theme")]
    for _ in range(3):
        await browser.send("press", key="t")
        themes.append(await browser.eval("document.querySelector('.jx-app').dataset.theme"))
    assert themes == ["light", "light", "dark", "light"]
    svg = await browser.eval("window.__jaxlsp.svgText()")
    assert svg.startswith("<svg") and "Layer_* \u00d73" in svg
    assert await browser.eval("window.__jaxlsp.pngBlob().then(b => b.size)") > 1000

    # An edit makes the graph stale: the page says so once typing pauses, no cursor move needed.
    uri = client.open("model.py")
    client.edit(uri, (0, 0), (0, 0), "# edited\n")
    await browser.wait("!!document.querySelector('.jx-banner-stale')")
    status, headers, _ = await _call(_get, url, f"/graph?token={token}&trace={trace_id}")
    assert status == 200 and headers["X-Jaxlsp-Stale"] == "1"

    # A new trace of the same target: the page offers to load it.
    new_id = await trace_stack(client)
    await browser.wait("!!document.querySelector('.jx-banner-newer')")
    await browser.send("click", selector=".jx-banner-newer button")
    await browser.wait(f"window.__jaxlsp.traceId === {json.dumps(new_id)}")
    assert await browser.eval("document.querySelectorAll('.jx-rollup').length") == 1
    assert await browser.eval("JSON.stringify(window.__jaxlsp.marks).length") > 0
    logs = await browser.send("logs")
    assert not [entry for entry in logs if entry.startswith("pageerror")], logs


async def test_the_bridge_demands_the_token_and_its_own_host(traced: JaxClient) -> None:
    lsp = traced
    trace_id, url, token = await _open(lsp)
    port = urlsplit(url).port
    graph_path = f"/graph?token={token}&trace={trace_id}"
    status, headers, body = await _call(_get, url, graph_path)
    assert status == 200 and headers["X-Jaxlsp-Stale"] == "0" and headers["Cache-Control"] == "no-store"
    assert not any(k.lower().startswith("access-control") for k in headers)
    graph = json.loads(body)
    # the compact form the trace is kept in (the viewer expands the rows itself)
    assert graph["format"] == "jaxlsp.graph" and graph["version"] == 2 and graph["nodes"]["count"] == 13

    for path in (
        f"/graph?trace={trace_id}",
        f"/graph?token={token[:-1]}x&trace={trace_id}",
        "/",
        "/viewer.js",
        "/events",
    ):
        status, headers, body = await _call(_get, url, path)
        assert status == 403, path
        assert token.encode() not in body
    # A page on another origin that rebinds its DNS name to 127.0.0.1 sends its own Host.
    status, _, _ = await _call(_get, url, graph_path, host=f"evil.example:{port}")
    assert status == 403
    status, _, _ = await _call(_get, url, graph_path, host=f"localhost:{port}")
    assert status == 200

    status, headers, body = await _call(_get, url, f"/?token={token}&trace={trace_id}")
    assert status == 200 and "Content-Security-Policy" in headers and b'"mode":"http"' in body
    assert f'"traceId":"{trace_id}"'.encode() in body
    for asset in ("viewer.js", "viewer.css"):
        status, _, body = await _call(_get, url, f"/{asset}?token={token}")
        assert status == 200 and len(body) > 1000
    for path in ("/../pyproject.toml", "/jaxlsp/viewer/__init__.py", "/index.html", "/etc/passwd"):
        status, _, _ = await _call(_get, url, f"{path}?token={token}")
        assert status == 404, path
    status, _, body = await _call(_get, url, f"/graph?token={token}&trace=nope")
    assert status == 404 and b"unknown trace" in body

    reveal = f"/reveal?token={token}"
    status, _, body = await _call(_get, url, reveal, "POST", b"{not json")
    assert status == 400
    status, _, body = await _call(_get, url, reveal, "POST", json.dumps({"traceId": trace_id}).encode())
    assert status == 400 and b"nodeId" in body
    status, _, body = await _call(
        _get, url, reveal, "POST", json.dumps({"traceId": trace_id, "nodeId": "n99"}).encode()
    )
    assert status == 404 and b"unknown node" in body
    shown = len(lsp.shown)
    status, _, body = await _call(_get, url, reveal, "POST", json.dumps({"traceId": trace_id, "nodeId": "n3"}).encode())
    assert status == 200 and json.loads(body)["location"]["range"]["start"]["line"] == 10
    # The server sends showDocument before its reply but does not wait for it: wait for it to land.
    await lsp.wait_until(lambda: len(lsp.shown) > shown)
    assert len(lsp.shown) == shown + 1 and lsp.shown[-1].selection is not None
    status, _, _ = await _call(_get, url, reveal)  # GET on a POST path
    assert status == 405

    # A second openGraph reuses the bridge; the server still answers after all of the above.
    again = await lsp.request("jaxlsp/openGraph", {"traceId": trace_id})
    assert urlsplit(again["url"]).port == port
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(5)):
        pass
    await lsp.finish()
    # The bridge stops with the server.
    try:
        socket.create_connection(("127.0.0.1", port), timeout=scaled(5)).close()
        raise AssertionError("the bridge still listens after the server exited")
    except ConnectionRefusedError:
        pass


def _static_page(tmp_path: Path, graph: Any) -> str:
    page = tmp_path / "graph.html"
    page.write_text(to_html(graph), encoding="utf-8")
    return page.as_uri()


async def test_the_static_export_is_the_same_viewer(tmp_path: Path, browser: Browser) -> None:
    graph = small_graph()
    graph.groups[1].label = "</script><b>x</b>"
    assert await browser.send("goto", url=_static_page(tmp_path, graph)) == 200
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    # The ELK worker runs from a Blob URL under the page's Content-Security-Policy.
    assert await browser.eval("document.querySelector('.jx-canvas').dataset.engine") == "elk"
    banner = await browser.eval("document.querySelector('.jx-banner-file').textContent")
    assert "Loaded from a file" in banner and "language server" in banner
    await browser.send("click", selector=".jx-op")
    status = await browser.wait(
        "document.querySelector('.jx-status').textContent.includes('needs the language server') && document.querySelector('.jx-status').textContent"
    )
    assert "jaxlsp/openGraph" in status
    labels = await browser.eval("[...document.querySelectorAll('.jx-t1, .jx-head')].map(e => e.textContent).join('|')")
    assert "</script><b>x</b>" in labels or await browser.eval("document.querySelectorAll('b').length") == 0
    assert await browser.eval("document.querySelectorAll('b').length") == 0
    _non_empty_png(await browser.screenshot("static-small.png"))


async def test_a_partial_graph_says_so(tmp_path: Path, browser: Browser) -> None:
    graph = chain_graph(30, group_every=10)
    graph.coverage.complete = False
    graph.coverage.opaque = [{"node": "n3", "reason": "pure_callback"}]
    await browser.send("goto", url=_static_page(tmp_path, graph))
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    text = await browser.eval("document.querySelector('.jx-banner-partial').textContent")
    assert "Partial coverage" in text and "pure_callback" in text
    # Three groups of ten identical sin nodes in a row roll up.
    assert await browser.eval("document.querySelector('.jx-rollup .jx-t1').textContent") == "Block_* \u00d73"
    assert io.to_json(graph)["coverage"]["complete"] is False


WEBVIEW = """<!doctype html>
<html><head><meta charset="utf-8">
<link rel="stylesheet" href="{css}">
<script>
window.posted = [];
window.acquireVsCodeApi = () => ({{ postMessage: (m) => window.posted.push(m) }});
window.JAXLSP_VIEWER = {{mode: "webview", traceId: "t1"}};
</script>
<script src="{js}"></script>
</head><body class="vscode-dark"></body></html>
"""


def webview_page(tmp_path: Path) -> str:
    """The committed viewer in a page that stands in for a VS Code webview (``window.posted``)."""
    viewer = Path(__file__).resolve().parents[2] / "jaxlsp" / "viewer"
    page = tmp_path / "webview.html"
    page.write_text(
        WEBVIEW.format(css=(viewer / "viewer.css").as_uri(), js=(viewer / "viewer.js").as_uri()), encoding="utf-8"
    )
    return page.as_uri()


async def test_the_webview_contract(tmp_path: Path, browser: Browser) -> None:
    """VS Code mode: ready, graph, highlight, stale, theme in; reveal and save out (docs/viewer.md)."""
    await browser.send("goto", url=webview_page(tmp_path))
    assert await browser.wait("window.posted.length && window.posted[0].type") == "ready"
    graph = json.dumps(io.to_json(small_graph()))
    await browser.eval(f"window.postMessage({{type: 'graph', traceId: 't1', graph: {graph}, stale: true}}, '*')")
    await browser.wait("window.__jaxlsp.marks.firstFull")
    assert await browser.eval("document.querySelector('.jx-app').dataset.theme") == "dark"  # the body class
    assert await browser.eval("!!document.querySelector('.jx-banner-stale')")
    await browser.eval("document.body.className = 'vscode-light'")
    await browser.wait("document.querySelector('.jx-app').dataset.theme === 'light'")

    await browser.send("click", selector=".jx-op")
    reveal = await browser.wait("window.posted.find((m) => m.type === 'reveal')")
    assert reveal["traceId"] == "t1" and reveal["nodeId"].startswith("n") and "frame" not in reveal
    # The host answers every reveal (by its id), and the footer says how it went.
    assert await browser.eval("document.querySelector('.jx-status').textContent") == "opening the source\u2026"
    where = {
        "uri": "file:///w/my%20model.py",
        "range": {"start": {"line": 4, "character": 0}, "end": {"line": 4, "character": 3}},
    }
    await browser.eval(
        f"window.postMessage({{type: 'revealed', id: {reveal['id']}, ok: true, location: {json.dumps(where)}}}, '*')"
    )
    await browser.wait("document.querySelector('.jx-status').textContent === 'opened my model.py:5'")
    await browser.send("click", selector=".jx-op")
    again = await browser.wait("window.posted.filter((m) => m.type === 'reveal')[1]")
    await browser.eval(
        f"window.postMessage({{type: 'revealed', id: {again['id']}, ok: false, error: 'the server is not running'}}, '*')"
    )
    await browser.wait(
        "document.querySelector('.jx-status').textContent === 'go to source failed: the server is not running'"
    )
    assert await browser.eval("document.querySelector('.jx-status').classList.contains('jx-error')")
    await browser.eval("window.postMessage({type: 'highlight', traceId: 't1', nodeIds: ['n6']}, '*')")
    await browser.wait("document.querySelector('.jx-canvas').dataset.highlighted === '1'")
    await browser.eval("window.postMessage({type: 'stale', traceId: 't1', stale: false}, '*')")
    await browser.wait("!document.querySelector('.jx-banner-stale')")

    await browser.send("click", selector="[data-action=svg]")
    saved = await browser.wait("window.posted.find((m) => m.type === 'save')")
    assert saved["filename"].endswith(".svg") and saved["mime"] == "image/svg+xml"
    assert base64.b64decode(saved["base64"]).startswith(b"<svg")
    await browser.send("click", selector="[data-action=png]")
    png = await browser.wait("window.posted.find((m) => m.type === 'save' && m.mime === 'image/png')")
    assert base64.b64decode(png["base64"]).startswith(PNG)
