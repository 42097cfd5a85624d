"""LSP notebook sync (3.17 ``notebookDocument/*``) with VS Code's capabilities, over stdio: lenses
and hover on cell documents, traces of cell targets, reveal into a cell, and positions that stay
right while cells are edited, inserted and deleted."""

from __future__ import annotations

import asyncio
import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.deadlines import scaled
from tests.server.conftest import CONFIG, JaxClient, copy_workspace, initialize_params, within
from tests.server.test_live import CONFIG as LIVE_CONFIG
from tests.server.test_live import settled, state

NOTEBOOK = "models.ipynb"
DENSE = 5  # the cell defining Dense2 (index in the notebook's cells, markdown counted)
SOFTMAX = 9
# Dense2's cell: ``h = nn.relu(nn.Dense(self.features)(x))`` is its line 5 (0-based)
DENSE_LINE = 5


class Notebook:
    """A notebook as VS Code's notebook editor syncs it: one document per cell."""

    def __init__(self, client: JaxClient, path: Path) -> None:
        self.client = client
        self.uri = path.as_uri()
        self.version = 1
        raw = json.loads(path.read_text())["cells"]
        self.cells = [
            (self.cell_uri(i), 2 if c["cell_type"] == "code" else 1, "".join(c["source"])) for i, c in enumerate(raw)
        ]
        self._next = len(raw)

    def cell_uri(self, handle: int) -> str:
        return f"vscode-notebook-cell:{self.uri[len('file://') :]}#ch{handle:04d}"

    @staticmethod
    def item(uri: str, kind: int, text: str) -> types.TextDocumentItem:
        return types.TextDocumentItem(uri=uri, language_id="python" if kind == 2 else "markdown", version=1, text=text)

    def open(self) -> None:
        self.client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=self.uri,
                    notebook_type="jupyter-notebook",
                    version=self.version,
                    cells=[types.NotebookCell(kind=types.NotebookCellKind(k), document=u) for u, k, _ in self.cells],
                ),
                cell_text_documents=[self.item(*c) for c in self.cells],
            )
        )

    def _change(self, cells: types.NotebookDocumentCellChanges) -> None:
        self.version += 1
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(version=self.version, uri=self.uri),
                change=types.NotebookDocumentChangeEvent(cells=cells),
            )
        )

    def insert(self, index: int, text: str, kind: int = 2) -> str:
        uri = self.cell_uri(self._next)
        self._next += 1
        self.cells.insert(index, (uri, kind, text))
        array = types.NotebookCellArrayChange(
            start=index, delete_count=0, cells=[types.NotebookCell(kind=types.NotebookCellKind(kind), document=uri)]
        )
        structure = types.NotebookDocumentCellChangeStructure(array=array, did_open=[self.item(uri, kind, text)])
        self._change(types.NotebookDocumentCellChanges(structure=structure))
        return uri

    def delete(self, index: int) -> None:
        uri, _, _ = self.cells.pop(index)
        array = types.NotebookCellArrayChange(start=index, delete_count=1)
        structure = types.NotebookDocumentCellChangeStructure(
            array=array, did_close=[types.TextDocumentIdentifier(uri=uri)]
        )
        self._change(types.NotebookDocumentCellChanges(structure=structure))

    def edit(self, index: int, line: int, text: str) -> None:
        """Replace line ``line`` of cell ``index`` by ``text``."""
        uri, kind, source = self.cells[index]
        lines = source.split("\n")
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, 0), types.Position(line, len(lines[line]))), text=text
        )
        lines[line] = text
        self.cells[index] = (uri, kind, "\n".join(lines))
        content = types.NotebookDocumentCellContentChanges(
            document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.version + 1), changes=[change]
        )
        self._change(types.NotebookDocumentCellChanges(text_content=[content]))

    def at(self, index: int) -> str:
        return self.cells[index][0]


def vscode_with_notebooks(root: Path) -> types.InitializeParams:
    """VS Code's capabilities (pytest-lsp's recording predates notebooks) plus notebook sync."""
    params = initialize_params("visual-studio-code", root)
    params.capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(
            dynamic_registration=True, execution_summary_support=True
        )
    )
    params.initialization_options = {"jaxlsp": {"liveShapes": False, "trusted": True, "inlayHints": True}}
    return params


@pytest_lsp.fixture(config=CONFIG)
async def vscode(lsp: JaxClient, tmp_path: Path) -> Any:
    root = copy_workspace("notebooks", tmp_path)
    lsp.client_name = "visual-studio-code"
    lsp.workspace = root
    lsp.initialize_result = await within(lsp.initialize_session(vscode_with_notebooks(root)))
    yield
    await lsp.finish()


async def trace_lenses(client: JaxClient, uri: str) -> list[tuple[str, int]]:
    """``(name, line)`` of the "Trace graph" lenses (after a trace, "Open graph" and "Trace with values"
    ones join them)."""
    return [
        (lens.data["name"], lens.range.start.line)
        for lens in await client.lenses(uri)
        if not lens.data.get("open") and not lens.data.get("values")
    ]


async def hover_text(client: JaxClient, uri: str, line: int) -> str | None:
    result = await within(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, 10))
        )
    )
    return None if result is None else str(result.contents.value)  # type: ignore[union-attr]


async def test_the_server_declares_notebook_sync_for_every_cell_of_jupyter_notebooks(vscode: JaxClient) -> None:
    assert vscode.initialize_result is not None
    sync = vscode.initialize_result.capabilities.notebook_document_sync
    assert isinstance(sync, types.NotebookDocumentSyncOptions)
    (selector,) = sync.notebook_selector
    assert selector.notebook == "jupyter-notebook"
    # no cell filter: a client would sync only the cells it names, and indices would shift
    assert getattr(selector, "cells", None) is None


async def test_lenses_trace_hover_and_reveal_in_cells_while_cells_move(vscode: JaxClient) -> None:
    client = vscode
    notebook = Notebook(client, client.workspace / NOTEBOOK)
    notebook.open()
    dense = notebook.at(DENSE)
    # one lens per cell definition, at its line within the cell; none in other cells
    assert await trace_lenses(client, dense) == [("Dense2", 0)]
    assert await trace_lenses(client, notebook.at(SOFTMAX)) == [("softmax_rows", 0)]
    assert await trace_lenses(client, notebook.at(3)) == []
    actions = await client.actions(dense, DENSE_LINE)
    assert [a.title for a in actions] == ["Trace graph: Dense2", "Trace with values: Dense2", "Trace compiled: Dense2"]
    found = client.plain(await client.request("jaxlsp/discover", {"textDocument": {"uri": dense}}))
    assert [(e["name"], e["cell"], e["range"]["start"]["line"]) for e in found["entrypoints"]] == [("Dense2", DENSE, 0)]

    # trace from the lens (its command carries the cell's URI)
    lens = (await client.lenses(dense))[0]
    resolved = await within(client.code_lens_resolve_async(lens))
    assert resolved.command is not None and resolved.command.arguments[0]["uri"] == dense
    result = client.plain(
        await within(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=resolved.command.command, arguments=resolved.command.arguments)
            ),
            120,
        )
    )
    assert result["summary"]["outputs"] == ["f32[4,3]"]
    text = await hover_text(client, dense, DENSE_LINE)
    assert text is not None and "f32[4,16]" in text and "fresh" in text
    assert await hover_text(client, notebook.at(SOFTMAX), 1) is None  # another cell: not traced

    # lens titles carry the figures; inlay hints on the assignment line
    titled = await within(client.code_lens_resolve_async((await client.lenses(dense))[0]))
    assert titled.command is not None and titled.command.title.startswith("Trace graph · ")
    hints = await within(
        client.text_document_inlay_hint_async(
            types.InlayHintParams(
                text_document=types.TextDocumentIdentifier(uri=dense),
                range=types.Range(types.Position(0, 0), types.Position(10, 0)),
            )
        )
    )
    assert [(h.position.line, h.label) for h in hints or []] == [(DENSE_LINE, ": f32[4,16]")]

    # reveal a node's frame: the cell's document, at the line within the cell
    nodes = client.plain(
        await client.request(
            "jaxlsp/nodesAt", {"textDocument": {"uri": dense}, "position": {"line": DENSE_LINE, "character": 12}}
        )
    )
    assert nodes["traceId"] == result["traceId"] and nodes["nodeIds"]
    shown = client.plain(
        await client.request("jaxlsp/revealSource", {"traceId": result["traceId"], "nodeId": nodes["nodeIds"][0]})
    )
    assert shown["location"]["uri"] == dense and shown["location"]["range"]["start"]["line"] == DENSE_LINE
    await client.wait_until(lambda: len(client.shown) == 1)
    assert client.shown[0].uri == dense and client.shown[0].selection.start.line == DENSE_LINE

    # insert a code cell and a markdown cell above: the lens stays on the class line of its cell,
    # hover follows the cell (now stale: the notebook's code changed)
    refreshes = client.refreshes
    notebook.insert(2, "import math\nimport os")
    notebook.insert(0, "# A new title", kind=1)
    await client.wait_for_refreshes(refreshes + 1)
    assert notebook.at(DENSE + 2) == dense
    assert await trace_lenses(client, dense) == [("Dense2", 0)]
    text = await hover_text(client, dense, DENSE_LINE)
    assert text is not None and "f32[4,16]" in text and "stale" in text
    stale = await within(client.code_lens_resolve_async((await client.lenses(dense))[0]))
    assert stale.command is not None and stale.command.title.startswith("Re-trace (stale)")
    shown = client.plain(
        await client.request("jaxlsp/revealSource", {"traceId": result["traceId"], "nodeId": nodes["nodeIds"][0]})
    )
    assert shown["location"]["uri"] == dense

    # delete them again: fresh, since the code cells' text is what it was when traced
    notebook.delete(0)
    notebook.delete(2)
    assert await trace_lenses(client, dense) == [("Dense2", 0)]
    text = await hover_text(client, dense, DENSE_LINE)
    assert text is not None and "fresh" in text

    # edit a line of the cell: stale, like an edit of a file; an edit that adds lines moves the lens
    notebook.edit(DENSE, 1, "    features: int = 32  # wider")
    text = await hover_text(client, dense, DENSE_LINE)
    assert text is not None and "stale" in text
    notebook.edit(DENSE, 0, "WIDE = 2\n\nclass Dense2(nn.Module):")
    assert await trace_lenses(client, dense) == [("Dense2", 2)]


async def test_a_failed_trace_puts_its_diagnostic_in_the_cell(vscode: JaxClient) -> None:
    client = vscode
    path = client.workspace / NOTEBOOK
    data = json.loads(path.read_text())
    data["cells"][SOFTMAX]["source"][2] = "    e = jnp.exp(shifted) @ jnp.ones((3, 3))\n"  # f32[2,5] @ f32[3,3]
    path.write_text(json.dumps(data))
    notebook = Notebook(client, path)
    notebook.open()
    softmax = notebook.at(SOFTMAX)
    with pytest.raises(JsonRpcException) as failed:
        await within(client.request("jaxlsp/trace", {"textDocument": {"uri": softmax}, "name": "softmax_rows"}), 120)
    assert "cell 9:3" in failed.value.message
    await client.wait_until(lambda: bool(client.finished))  # sent right after the diagnostic
    assert [(d.code, d.range.start.line) for d in client.diagnostics[softmax]] == [("trace", 2)]


def virtual_document(path: Path) -> str:
    """A notebook as jupyterlab-lsp shows it to a server: its code cells joined by two blank lines,
    IPython lines rewritten its own way (``get_ipython()`` calls)."""
    blocks = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).split("\n")
        if lines[0].startswith("%%"):
            lines[0] = f'get_ipython().run_cell_magic("{lines[0][2:]}", "", """'
            lines[-1] += '""")'
        lines = [
            f'get_ipython().run_line_magic("{line[1:]}")' if line.startswith(("%", "!")) else line for line in lines
        ]
        blocks.append("\n".join(lines) + "\n")
    return "\n\n".join(blocks)


@pytest_lsp.fixture(config=CONFIG)
async def jupyterlab(lsp: JaxClient, tmp_path: Path) -> Any:
    """jupyterlab-lsp's way: no notebook sync, no initialization options, one text document per notebook."""
    root = copy_workspace("notebooks", tmp_path)
    lsp.client_name = "jupyterlab-lsp"
    lsp.workspace = root
    lsp.trust_answer = "Trust once"
    params = initialize_params("visual-studio-code", root)
    lsp.initialize_result = await within(lsp.initialize_session(params))
    yield
    await lsp.finish()


async def test_a_notebook_as_one_document_jupyterlab_lsp_style(jupyterlab: JaxClient) -> None:
    client = jupyterlab
    path = client.workspace / NOTEBOOK
    uri = path.as_uri()
    text = virtual_document(path)
    uri = client.open_text(uri, text)
    found = client.plain(await client.request("jaxlsp/discover", {"textDocument": {"uri": uri}}))
    assert [(e["name"], e["cell"], e["range"]["start"]["line"]) for e in found["entrypoints"]] == [
        ("Dense2", DENSE, 0),
        ("Scale", 6, 0),
        ("Gate", 8, 0),
        ("softmax_rows", SOFTMAX, 0),
    ]
    result = client.plain(
        await within(
            client.request("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "Dense2", "cell": DENSE}), 120
        )
    )
    assert result["summary"]["outputs"] == ["f32[4,3]"] and client.trust_prompts
    # the traced line, in the document's own lines: found by the cell's text
    lines = text.split("\n")
    line = lines.index("        h = nn.relu(nn.Dense(self.features)(x))")
    hover = await hover_text(client, uri, line)
    assert hover is not None and "f32[4,16]" in hover and "fresh" in hover
    assert await hover_text(client, uri, line - 2) is None  # ``@nn.compact``: no operation there
    assert await hover_text(client, uri, line + 3) is None  # a blank line between two cells
    nodes = client.plain(
        await client.request(
            "jaxlsp/nodesAt", {"textDocument": {"uri": uri}, "position": {"line": line, "character": 12}}
        )
    )
    shown = client.plain(
        await client.request("jaxlsp/revealSource", {"traceId": result["traceId"], "nodeId": nodes["nodeIds"][0]})
    )
    assert shown["location"] == {"uri": uri, "range": shown["location"]["range"]}
    assert shown["location"]["range"]["start"]["line"] == line

    # an edit of a cell's line in the document marks the graph stale, as an edit of a file does:
    # hover, and the browser viewer's graph (what JupyterLab's viewer tab shows)
    opened = client.plain(await client.request("jaxlsp/openGraph", {"traceId": result["traceId"]}))
    assert await asyncio.to_thread(stale_header, opened["url"]) == "0"
    client.edit(uri, (line + 1, 0), (line + 1, 0), "        # edited\n")
    hover = await hover_text(client, uri, line)
    assert hover is not None and "f32[4,16]" in hover and "stale" in hover
    assert await asyncio.to_thread(stale_header, opened["url"]) == "1"
    # the index reads the edited cell as the client shows it: lines added above the class move it
    start = lines.index("class Dense2(nn.Module):")
    client.edit(uri, (start, 0), (start, 0), "WIDE = 2\n\n")
    found = client.plain(await client.request("jaxlsp/discover", {"textDocument": {"uri": uri}}))
    dense = next(e for e in found["entrypoints"] if e["name"] == "Dense2")
    assert (dense["cell"], dense["range"]["start"]["line"]) == (DENSE, 2)


def stale_header(url: str) -> str:
    """The viewer bridge's word on a graph page's trace: ``X-Jaxlsp-Stale`` of its graph."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=scaled(10))
    try:
        conn.request("GET", f"/graph?{parts.query}")
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200, answer.status
        return str(answer.getheader("X-Jaxlsp-Stale"))
    finally:
        conn.close()


@pytest_lsp.fixture(config=LIVE_CONFIG)
async def vscode_live(lsp: JaxClient, tmp_path: Path) -> Any:
    """VS Code with notebook sync, trusted, live shapes on (the default)."""
    root = copy_workspace("notebooks", tmp_path)
    lsp.client_name = "visual-studio-code"
    lsp.workspace = root
    params = vscode_with_notebooks(root)
    params.initialization_options = {"jaxlsp": {"trusted": True, "inlayHints": True}}
    lsp.initialize_result = await within(lsp.initialize_session(params))
    yield
    await lsp.finish()


async def test_a_notebook_is_live_on_open_and_on_save(vscode_live: JaxClient) -> None:
    """Opening a notebook traces its cells' targets (hover with no click); a save that breaks a
    cell puts the diagnostic in that cell, and the save that fixes it clears it."""
    client = vscode_live
    recipe = client.workspace / "jaxlsp.toml"
    # a profile that runs the cells above its target is never run on a save
    recipe.write_text(
        recipe.read_text().replace('target = "models.ipynb::Gate"', 'target = "models.ipynb::Gate"\nload = "cells"')
    )
    path = client.workspace / NOTEBOOK
    notebook = Notebook(client, path)
    notebook.open()
    dense = notebook.at(DENSE)
    await settled(client, "Dense2")
    gate = await settled(client, "Gate", ("notLive", "fresh", "failed"))
    assert gate["state"] == "notLive" and 'load = "cells"' in gate["reason"], gate
    text = await hover_text(client, dense, DENSE_LINE)
    assert text is not None and "f32[4,16]" in text, text

    data = json.loads(path.read_text())
    good = data["cells"][SOFTMAX]["source"][2]
    before = state(client, "softmax_rows")
    data["cells"][SOFTMAX]["source"][2] = "    e = jnp.exp(shifted) @ jnp.ones((3, 3))\n"  # f32[2,5] @ f32[3,3]
    path.write_text(json.dumps(data))
    notebook.edit(SOFTMAX, 2, data["cells"][SOFTMAX]["source"][2].rstrip("\n"))
    client.notebook_document_did_save(
        types.DidSaveNotebookDocumentParams(notebook_document=types.NotebookDocumentIdentifier(uri=notebook.uri))
    )
    softmax = notebook.at(SOFTMAX)
    await settled(client, "softmax_rows", ("failed",))
    await client.wait_until(lambda: [d.range.start.line for d in client.diagnostics.get(softmax, [])] == [2])

    data["cells"][SOFTMAX]["source"][2] = good
    path.write_text(json.dumps(data))
    notebook.edit(SOFTMAX, 2, good.rstrip("\n"))
    client.notebook_document_did_save(
        types.DidSaveNotebookDocumentParams(notebook_document=types.NotebookDocumentIdentifier(uri=notebook.uri))
    )
    await settled(client, "softmax_rows", after=(before or {}).get("traceId"))
    await client.wait_until(lambda: not [d for d in client.diagnostics.get(softmax, []) if d.source == "jaxlsp"])


@pytest_lsp.fixture(config=LIVE_CONFIG)
async def jupyterlab_live(lsp: JaxClient, tmp_path: Path) -> Any:
    """jupyterlab-lsp's way (one text document per notebook, no notebook sync), trusted, live on."""
    root = copy_workspace("notebooks", tmp_path)
    lsp.client_name = "jupyterlab-lsp"
    lsp.workspace = root
    params = initialize_params("visual-studio-code", root)
    params.initialization_options = {"jaxlsp": {"trusted": True}}
    lsp.initialize_result = await within(lsp.initialize_session(params))
    yield
    await lsp.finish()


async def test_a_notebook_sent_as_one_document_is_live_on_open_and_on_save(jupyterlab_live: JaxClient) -> None:
    """jupyterlab-lsp opens a notebook as one document under its .ipynb URI: opening it traces the
    targets its cells define (hover with no click), and a save that changes a width re-traces."""
    client = jupyterlab_live
    path = client.workspace / NOTEBOOK
    text = virtual_document(path)
    uri = client.open_text(path.as_uri(), text)
    first = await settled(client, "Dense2")
    lines = text.split("\n")
    line = lines.index("        return nn.Dense(3)(h)")
    shown = await hover_text(client, uri, line)
    assert shown is not None and "f32[4,3]" in shown and "fresh" in shown, shown

    data = json.loads(path.read_text())
    source = data["cells"][DENSE]["source"]
    at = next(i for i, s in enumerate(source) if "nn.Dense(3)" in s)
    source[at] = source[at].replace("nn.Dense(3)", "nn.Dense(5)")
    path.write_text(json.dumps(data))
    client.edit(uri, (line, 0), (line, len(lines[line])), "        return nn.Dense(5)(h)")
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    await settled(client, "Dense2", after=first["traceId"])
    shown = await hover_text(client, uri, line)
    assert shown is not None and "f32[4,5]" in shown and "fresh" in shown, shown
