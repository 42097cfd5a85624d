"""Tracing from the editor over stdio: trust, jaxlsp/trace and the command, graph pages, nodes.

Real captures (JAX on CPU) of ``tests/workspaces/lsp_trace``, whose module writes a sentinel file
when imported: it proves that nothing ran before the user trusted the folder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.server.conftest import CONFIG, JaxClient, copy_workspace, initialize_params, within

REQUEST_FAILED = -32803
INVALID_PARAMS = -32602


def _options(trusted: bool, inlay_hints: bool = False) -> Any:
    return {"jaxlsp": {"liveShapes": False, "trusted": True, "inlayHints": inlay_hints}} if trusted else None


def tracing_session(name: str, clients: list[str], trusted: bool = False, inlay_hints: bool = False) -> Any:
    @pytest_lsp.fixture(config=CONFIG, params=clients, name=name)
    async def fixture(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
        root = copy_workspace("lsp_trace", tmp_path)
        lsp.client_name = request.param
        lsp.workspace = root
        params = initialize_params(request.param, root)
        params.initialization_options = _options(trusted, inlay_hints)
        lsp.initialize_result = await within(lsp.initialize_session(params))
        yield
        await lsp.finish()

    return fixture


untrusted = tracing_session("untrusted", ["visual-studio-code", "neovim"])
trusted = tracing_session("trusted", ["visual-studio-code"], trusted=True)
both = tracing_session("both", ["visual-studio-code", "neovim"], trusted=True)
hinted = tracing_session("hinted", ["visual-studio-code", "neovim"], trusted=True, inlay_hints=True)


async def _trace(client: JaxClient, name: str, **extra: Any) -> Any:
    uri = client.uri("model.py")
    return client.plain(
        await client.within(client.request("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": name, **extra}), 120)
    )


async def _error(client: JaxClient, method: str, params: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await client.within(client.request(method, params), 120)
    return info.value


async def test_declined_trust_runs_nothing(untrusted: JaxClient) -> None:
    client = untrusted
    client.trust_answer = "Cancel"
    error = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": client.uri("model.py")}, "name": "predict"})
    assert error.code == REQUEST_FAILED and "is not trusted" in error.message
    assert client.trust_prompts == [f'Trust "{client.workspace}" to run its code for tracing?']
    assert not (client.workspace / "IMPORTED").exists()  # no import, no spare, no interpreter check


async def test_trust_once_then_trace_page_and_node(untrusted: JaxClient) -> None:
    client = untrusted
    client.trust_answer = "Trust once"
    result = await _trace(client, "predict")
    assert (client.workspace / "IMPORTED").exists()
    assert result["summary"]["outputs"] == ["f32[2]"]
    assert result["summary"]["ops"] >= 4 and result["freshness"] == "fresh" and result["profile"] == "predict"
    await client.wait_until(lambda: any(f.get("traceId") == result["traceId"] for f in client.finished))

    again = await _trace(client, "predict")  # trusted for the session: no second prompt
    assert len(client.trust_prompts) == 1 and again["traceId"] != result["traceId"]

    top = client.plain(await client.request("jaxlsp/graph", {"traceId": result["traceId"]}))
    # @jax.jit: one box at the top level, the call inside its own region (not a jit node beside it).
    (group,) = top["items"]
    assert (group["kind"], group["groupKind"]) == ("group", "jit") and group["counts"]["nodes"] >= 4
    body = client.plain(await client.request("jaxlsp/graph", {"traceId": result["traceId"], "group": group["id"]}))
    assert {item["kind"] for item in body["items"]} <= {"node", "group"} and body["items"]
    assert (body["items"][0]["kind"], body["items"][0]["primitive"]) == ("node", "jit")
    inner = await _all_nodes(client, result["traceId"])
    primitives = [n["primitive"] for n in inner]
    assert "dot_general" in primitives and "tanh" in primitives

    first = client.plain(await client.request("jaxlsp/graph", {"traceId": result["traceId"], "limit": 1}))
    assert len(first["items"]) == 1

    dot = next(n for n in inner if n["primitive"] == "dot_general")
    node = client.plain(await client.request("jaxlsp/node", {"traceId": result["traceId"], "nodeId": dot["id"]}))
    assert [v["type"] for v in node["inputs"]] == ["f32[2,3]", "f32[3,4]"]
    assert [v["type"] for v in node["outputs"]] == ["f32[2,4]"]
    frame = node["frames"][0]
    assert frame["uri"] == client.uri("model.py")
    line = (client.workspace / "model.py").read_text().splitlines()[frame["range"]["start"]["line"]]
    assert "x @ w" in line


async def _all_nodes(client: JaxClient, trace_id: str, group: str | None = None) -> list[dict[str, Any]]:
    """Every node under ``group``, expanding child groups, following cursors."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"traceId": trace_id, "limit": 2}
        if group:
            params["group"] = group
        if cursor:
            params["cursor"] = cursor
        page = client.plain(await client.request("jaxlsp/graph", params))
        for item in page["items"]:
            if item["kind"] == "group":
                out.extend(await _all_nodes(client, trace_id, item["id"]))
            else:
                out.append(item)
        cursor = page.get("nextCursor")
        if not cursor:
            return out


async def test_needs_input_answers_with_the_missing_fields(trusted: JaxClient) -> None:
    client = trusted
    result = await _trace(client, "needs")
    assert client.trust_prompts == []  # initializationOptions carried the editor's trust
    assert result["needsInput"] and "shape" in str(result["needsInput"][0])
    assert "[profiles.needs]" in result["proposal"]


async def test_trace_graph_command_and_bad_graph_params(trusted: JaxClient) -> None:
    client = trusted
    uri = client.uri("model.py")
    result = client.plain(
        await client.within(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="jaxlsp.traceGraph", arguments=[{"uri": uri, "name": "predict"}])
            ),
            120,
        )
    )
    trace_id = result["traceId"]
    cases = {
        "no traceId": {},
        "limit zero": {"traceId": trace_id, "limit": 0},
        "limit text": {"traceId": trace_id, "limit": "10"},
        "bad cursor": {"traceId": trace_id, "cursor": "-5"},
        "group not a string": {"traceId": trace_id, "group": 3},
    }
    for case, params in cases.items():
        assert (await _error(client, "jaxlsp/graph", params)).code == INVALID_PARAMS, case
    assert (await _error(client, "jaxlsp/graph", {"traceId": "nope"})).code == REQUEST_FAILED
    assert (await _error(client, "jaxlsp/graph", {"traceId": trace_id, "group": "g999"})).code == REQUEST_FAILED
    assert (await _error(client, "jaxlsp/node", {"traceId": trace_id, "nodeId": "n999"})).code == REQUEST_FAILED
    assert (await _error(client, "jaxlsp/node", {"traceId": trace_id})).code == INVALID_PARAMS
    failed = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict", "profile": "nope"})
    assert failed.code == REQUEST_FAILED


async def test_always_is_remembered_and_can_be_revoked(untrusted: JaxClient) -> None:
    client = untrusted
    client.trust_answer = "Always"
    await _trace(client, "predict")
    listed = await client.within(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command="jaxlsp.listTrusted"))
    )
    assert str(client.workspace) in listed
    revoked = await client.within(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="jaxlsp.revokeTrust", arguments=[str(client.workspace)])
        )
    )
    assert revoked is True
    client.trust_answer = "Cancel"
    error = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": client.uri("model.py")}, "name": "predict"})
    assert error.code == REQUEST_FAILED and len(client.trust_prompts) == 2


async def test_views_of_a_trace(trusted: JaxClient) -> None:
    """nodesAt, hover (fresh, then stale after an unsaved edit), export, revealSource, openGraph."""
    client = trusted
    uri = client.open("model.py")
    result = await _trace(client, "predict")
    trace_id = result["traceId"]

    at = client.plain(
        await client.request("jaxlsp/nodesAt", {"textDocument": {"uri": uri}, "position": {"line": 11, "character": 8}})
    )
    assert at["traceId"] == trace_id and at["nodeIds"]
    primitives = [
        client.plain(await client.request("jaxlsp/node", {"traceId": trace_id, "nodeId": n}))["primitive"]
        for n in at["nodeIds"]
    ]
    assert {"dot_general", "tanh"} <= set(primitives)
    nowhere = client.plain(
        await client.request("jaxlsp/nodesAt", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    )
    assert nowhere["nodeIds"] == []

    hover = await client.within(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(11, 8))
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "`dot_general` → `f32[2,4]`" in text and "`tanh` → `f32[2,4]`" in text and "fresh" in text
    # The first line names jaxlsp; no line is a method name or an internal id.
    assert text.startswith("**jaxlsp** · `predict`") and "jaxlsp/" not in text and trace_id not in text, text
    client.edit(uri, (11, 4), (11, 4), "# ")  # an unsaved edit of a traced file makes the trace stale
    stale = await client.within(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(11, 8))
        )
    )
    assert stale is not None and "stale" in stale.contents.value  # type: ignore[union-attr]
    assert (
        await client.within(
            client.text_document_hover_async(
                types.HoverParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(0, 0))
            )
        )
        is None
    )

    for fmt, head in (("json", "{"), ("dot", "digraph"), ("html", "<!")):
        exported = client.plain(await client.request("jaxlsp/export", {"traceId": trace_id, "format": fmt}))
        path = Path(exported["uri"].removeprefix("file://"))
        assert path.read_text().lstrip().lower().startswith(head.lower()) and not path.is_relative_to(client.workspace)
    assert (await _error(client, "jaxlsp/export", {"traceId": trace_id, "format": "svg"})).code == INVALID_PARAMS

    node_id = at["nodeIds"][0]
    revealed = client.plain(await client.request("jaxlsp/revealSource", {"traceId": trace_id, "nodeId": node_id}))
    assert revealed["location"]["uri"] == uri and revealed["location"]["range"]["start"]["line"] == 11
    await client.wait_until(lambda: any(s.uri == uri and s.selection is not None for s in client.shown))
    opened = client.plain(await client.request("jaxlsp/openGraph", {"traceId": trace_id}))
    assert opened["url"].startswith("http://127.0.0.1:")  # the viewer on the loopback bridge
    await client.wait_until(lambda: any(s.external for s in client.shown))
    assert (
        await _error(client, "jaxlsp/revealSource", {"traceId": trace_id, "nodeId": node_id, "frame": 99})
    ).code == REQUEST_FAILED
    assert (await _error(client, "jaxlsp/nodesAt", {"textDocument": {"uri": uri}})).code == INVALID_PARAMS


async def test_a_failed_trace_is_a_diagnostic_on_the_users_line(trusted: JaxClient) -> None:
    client = trusted
    uri = client.open("model.py")
    error = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "bad"})
    assert error.code == REQUEST_FAILED and "model.py:21" in error.message
    await client.wait_until(lambda: bool(client.diagnostics.get(uri)))
    (diagnostic,) = client.diagnostics[uri]
    assert diagnostic.range.start.line == 20 and diagnostic.source == "jaxlsp" and diagnostic.code == "trace"
    # said once: not "tracing bad failed (trace): tracing bad failed: ... (at .../model.py:21)"
    assert diagnostic.message.startswith("tracing bad failed (trace): TracerBoolConversionError"), diagnostic.message
    assert diagnostic.message.count("tracing bad failed") == 1 and "(at " not in diagnostic.message
    assert any(f.get("ok") is False and f.get("name") == "bad" for f in client.finished)


async def test_a_target_returning_a_key_traces(trusted: JaxClient) -> None:
    """Once a -32603 with a raw traceback (outputs[0].role: expected one of output, state, got "key")."""
    client = trusted
    result = await _trace_uri(client, client.uri("keys.py"), "sampler")
    assert result["summary"]["outputs"] == ["key<fry>[]", "f32[3]"]
    await client.wait_until(lambda: any(f.get("traceId") == result["traceId"] for f in client.finished))


async def test_lens_titles_carry_the_last_trace(trusted: JaxClient) -> None:
    client = trusted
    uri = client.open("model.py")

    async def title() -> str:
        lenses = await client.lenses(uri)
        lens = next(lens for lens in lenses if lens.data["name"] == "predict")
        resolved = await client.within(client.code_lens_resolve_async(lens))
        assert resolved.command is not None
        return resolved.command.title

    async def open_lenses() -> list[types.CodeLens]:
        lenses = [lens for lens in await client.lenses(uri) if lens.data.get("open")]
        return [await client.within(client.code_lens_resolve_async(lens)) for lens in lenses]

    assert await title() == "Trace graph"
    assert await open_lenses() == []  # nothing traced: nothing to open
    result = await _trace(client, "predict")
    assert await title() == f"Trace graph · {result['summary']['ops']:,} ops · f32[2]"
    (opener,) = await open_lenses()
    assert opener.command is not None and opener.command.title == "Open graph"
    assert opener.command.command == "jaxlsp.openGraph"
    assert client.plain(opener.command.arguments) == [{"traceId": result["traceId"]}]
    opened = client.plain(
        await client.within(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="jaxlsp.openGraph", arguments=opener.command.arguments)
            )
        )
    )
    assert opened["url"].startswith("http://127.0.0.1:") and f"trace={result['traceId']}" in opened["url"]
    # Editors without lenses get the same pair as code actions on the def line.
    source = (client.workspace / "model.py").read_text().splitlines()
    def_line = next(i for i, line in enumerate(source) if line.startswith("def predict("))
    actions = [(a.title, a.command.command) for a in await client.actions(uri, def_line)]
    assert actions == [
        ("Trace graph: predict", "jaxlsp.traceGraph"),
        ("Open graph: predict", "jaxlsp.openGraph"),
        ("Trace with values: predict", "jaxlsp.traceWithValues"),
        ("Trace compiled: predict", "jaxlsp.traceCompiled"),
    ]
    client.edit(uri, (11, 4), (11, 4), "# ")
    assert (await title()).startswith("Re-trace (stale) · ")


async def test_recipe_problems_are_diagnostics_on_jaxlsp_toml(trusted: JaxClient) -> None:
    client = trusted
    recipe = client.workspace / "jaxlsp.toml"
    recipe.write_text(recipe.read_text().replace("shape = [3, 4]", "shape = [3, -4]"))
    error = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": client.uri("model.py")}, "name": "predict"})
    assert error.code == REQUEST_FAILED and "jaxlsp.toml:5" in error.message
    await client.wait_until(lambda: bool(client.diagnostics.get(recipe.as_uri())))
    (diagnostic,) = client.diagnostics[recipe.as_uri()]
    assert diagnostic.range.start.line == 4 and "shape[1]" in diagnostic.message and diagnostic.code == "recipe"


async def test_inlay_hints_show_the_shape_bound_by_each_assignment(hinted: JaxClient) -> None:
    client = hinted
    uri = client.open("model.py")
    await _trace(client, "predict")
    hints = await client.within(
        client.text_document_inlay_hint_async(
            types.InlayHintParams(
                text_document=types.TextDocumentIdentifier(uri),
                range=types.Range(types.Position(0, 0), types.Position(30, 0)),
            )
        )
    )
    assert [(h.position.line, h.label) for h in hints or []] == [(11, ": f32[2,4]")]


async def test_a_new_trace_supersedes_the_running_one_and_kills_its_worker(trusted: JaxClient) -> None:
    client = trusted
    hold = client.workspace / "HOLD"
    pid_file = client.workspace / "slow.pid"
    hold.write_text("hold")
    uri = client.uri("slow.py")
    # its own deadline: it starts before, and outlives, the waits below (60 + 120 + 30 s)
    first = asyncio.ensure_future(client.request("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "slow"}, 240))
    await client.within(_until(pid_file.exists), 60)
    held_pid = int(pid_file.read_text())
    second = await _trace_uri(client, uri, "slow")  # HOLD still there: only the first import waits
    assert second["summary"]["outputs"] == ["f32[5]"]
    with pytest.raises(JsonRpcException) as info:
        await client.within(first, 30)
    assert info.value.code in (-32800, REQUEST_FAILED)
    await client.within(_until(lambda: not _alive(held_pid)), 15)
    hold.unlink()


async def test_two_traces_at_once(trusted: JaxClient) -> None:
    client = trusted
    a, b = await asyncio.gather(_trace(client, "predict"), _trace_uri(client, client.uri("slow.py"), "slow"))
    assert a["summary"]["outputs"] == ["f32[2]"] and b["summary"]["outputs"] == ["f32[5]"]


async def _trace_uri(client: JaxClient, uri: str, name: str) -> Any:
    return client.plain(
        await client.within(client.request("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": name}), 120)
    )


async def _until(predicate: Any) -> None:
    """Poll a file-system condition the server cannot signal (bounded by the caller's deadline)."""
    while not predicate():
        await asyncio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


async def test_frames_use_the_negotiated_position_encoding(both: JaxClient) -> None:
    """Non-ASCII text (an astral character too) before the traced expression: VS Code counts UTF-16
    units, Neovim UTF-8 bytes; JAX reports UTF-8 byte columns and the graph code points."""
    client = both
    uri = client.open("uni.py")
    result = await _trace_uri(client, uri, "f")
    line_text = (client.workspace / "uni.py").read_text(encoding="utf-8").splitlines()[4]
    prefix = line_text[: line_text.index("jnp.sin")]
    expected = len(prefix.encode("utf-8")) if client.client_name == "neovim" else len(prefix.encode("utf-16-le")) // 2
    at = client.plain(
        await client.request(
            "jaxlsp/nodesAt", {"textDocument": {"uri": uri}, "position": {"line": 4, "character": expected}}
        )
    )
    sin = None
    for node_id in at["nodeIds"]:
        node = client.plain(await client.request("jaxlsp/node", {"traceId": result["traceId"], "nodeId": node_id}))
        if node["primitive"] == "sin":
            sin = node
    assert sin is not None
    start = sin["frames"][0]["range"]["start"]
    assert (start["line"], start["character"]) == (4, expected)
    assert expected != len(prefix)  # the encodings really differ from code points here


async def test_cancel_request_kills_the_worker_at_once(trusted: JaxClient) -> None:
    client = trusted
    hold = client.workspace / "HOLD"
    pid_file = client.workspace / "slow.pid"
    hold.write_text("hold")
    uri = client.uri("slow.py")
    request_id = "trace-to-cancel"
    pending = asyncio.ensure_future(
        client.protocol.send_request_async(
            "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "slow"}, msg_id=request_id
        )
    )
    await client.within(_until(pid_file.exists), 60)
    held_pid = int(pid_file.read_text())
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=request_id))
    with pytest.raises(JsonRpcException) as info:
        await client.within(pending, 30)
    assert info.value.code == -32800  # RequestCancelled
    await client.within(_until(lambda: not _alive(held_pid)), 15)  # the worker is gone, not finished
    hold.unlink()
    again = await _trace(client, "predict")  # and the server goes on serving
    assert again["summary"]["outputs"] == ["f32[2]"]


async def test_reveal_and_open_never_wait_on_the_clients_show_document_answer(trusted: JaxClient) -> None:
    client = trusted
    client.show_answers = False  # null instead of {success}: once, openGraph never answered
    result = await _trace(client, "predict")
    dot = next(n for n in await _all_nodes(client, result["traceId"]) if n["primitive"] == "dot_general")
    revealed = client.plain(
        await client.within(
            client.request("jaxlsp/revealSource", {"traceId": result["traceId"], "nodeId": dot["id"]}), 30
        )
    )
    assert revealed["location"]["uri"] == client.uri("model.py")
    opened = client.plain(await client.within(client.request("jaxlsp/openGraph", {"traceId": result["traceId"]}), 30))
    assert opened["url"].startswith("http://127.0.0.1:")
    await client.wait_until(lambda: len(client.shown) >= 2)  # both were still asked for
