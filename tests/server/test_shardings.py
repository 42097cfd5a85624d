"""Shardings over LSP (issue 28): the explicitly sharded MLP of ``tests/workspaces/sharding`` on 4
virtual CPU devices says its values' shardings in hover and in the graph pages, and a program
whose shardings disagree is a diagnostic at its line naming both. Real server, real JAX."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.server.conftest import JaxClient, trusted_session

REQUEST_FAILED = -32803


sharded = trusted_session("sharding", "sharded")


def _line(client: JaxClient, text: str) -> int:
    """The 0-based line of model.py holding ``text``."""
    lines = (client.workspace / "model.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines) if text in line)


async def _hover(client: JaxClient, uri: str, line: int) -> str:
    hover = await client.within(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, 8))
        )
    )
    assert hover is not None
    return str(hover.contents.value)  # type: ignore[union-attr]


async def test_hover_and_pages_say_the_shardings_and_a_mismatch_is_a_diagnostic(sharded: JaxClient) -> None:
    client = sharded
    uri = client.open("model.py")
    result = client.plain(
        await client.within(
            client.request("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "mlp", "profile": "mlp"}), 120
        )
    )
    assert result["summary"]["outputs"] == ["f32[8@x,4]"]
    text = await _hover(client, uri, _line(client, "jnp.tanh("))
    assert "`tanh` → `f32[8@x,64]`" in text and "`dot_general` → `f32[8@x,64]`" in text, text
    resharded = await _hover(client, uri, _line(client, "jax.sharding.reshard(h"))
    assert "`reshard(P('x', None))` → `f32[8@x,64]`" in resharded, resharded
    mapped = await _hover(client, uri, _line(client, "jax.shard_map("))
    assert "`shard_map(in P('x', None) → out P('x', None))` → `f32[8@x,4]`" in mapped, mapped
    top = client.plain(await client.request("jaxlsp/graph", {"traceId": result["traceId"]}))
    tanh = next(item for item in top["items"] if item.get("primitive") == "tanh")
    assert [v["type"] for v in tanh["outputs"]] == ["f32[8@x,64]"], tanh

    with pytest.raises(JsonRpcException) as info:
        await client.within(
            client.request("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "mismatch", "profile": "mismatch"}),
            120,
        )
    assert info.value.code == REQUEST_FAILED and "sharding mismatch" in info.value.message
    line = _line(client, "return a + b")
    await client.wait_until(lambda: bool(client.diagnostics.get(uri)))
    (diagnostic,) = client.diagnostics[uri]
    assert diagnostic.range.start.line == line and diagnostic.code == "trace", diagnostic
    assert "sharding mismatch" in diagnostic.message
    assert "f32[8@x,16]" in diagnostic.message and "f32[8,16@x]" in diagnostic.message, diagnostic.message
