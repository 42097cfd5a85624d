"""Annotated code is live without a run (issue 56, item 6): a jaxtyping-annotated function that
nothing calls and no profile names is traced on open with its dimension names symbolic.

Real captures (JAX on CPU) of ``tests/workspaces/lsp_annotated``, with nothing learned.
"""

from __future__ import annotations

from lsprotocol import types

from tests.server.conftest import JaxClient, trusted_session
from tests.server.test_live import CONFIG, hover, line_of, settled

FILE = "annotated.py"


annotated_session = trusted_session("lsp_annotated", "annotated", CONFIG, {"trusted": True})  # live shapes on


async def test_annotated_function_shows_its_dimension_names_on_open(annotated: JaxClient) -> None:
    client = annotated
    uri = client.open(FILE)
    await settled(client, "pairwise_sq_dists")
    assert not [d for d in client.diagnostics.get(uri, []) if d.code == "shape-contract"]  # n, m as annotated
    shown = await hover(client, FILE, line_of(client, FILE, "return jnp.sum(diff**2"))
    assert "f32[n,m]" in shown, shown
    assert "f32[n,m,d]" in await hover(client, FILE, line_of(client, FILE, "diff = x[:, None, :]"))


async def test_a_reshape_for_some_sizes_is_a_diagnostic_saying_which(annotated: JaxClient) -> None:
    client = annotated
    uri = client.open(FILE)
    await settled(client, "blocks", ("failed",))

    def at_blocks() -> list[types.Diagnostic]:
        return [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp" and "blocks" in d.message]

    await client.wait_until(lambda: bool(at_blocks()), 60)
    (diagnostic,) = at_blocks()
    assert diagnostic.range.start.line == line_of(client, FILE, "grouped = x.reshape(-1, 4)")
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert "n is a multiple of 4" in diagnostic.message, diagnostic.message


async def test_a_dimension_that_cannot_stay_a_symbol_asks_for_its_size(annotated: JaxClient) -> None:
    client = annotated
    uri = client.open(FILE)
    why = await settled(client, "counted", ("notLive", "failed", "fresh"))
    assert why["state"] == "notLive", why  # as before: its sizes are asked for, never an empty graph
    assert why["reason"].startswith("needs input (profiles.counted.dims.n"), why
    assert "n cannot be traced for any size" in why["reason"], why  # which dimension forced it
    assert not [d for d in client.diagnostics.get(uri, []) if "counted" in d.message]
    params = {"textDocument": {"uri": uri}, "name": "counted"}
    asked = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), 300)
    first = asked["needsInput"][0]
    assert first["path"] == "profiles.counted.dims.n" and "requires a constant" in first["message"], asked
    answers = {"profiles.counted.dims.n": "5", "profiles.counted.dims.d": "3"}
    done = await client.within(client.protocol.send_request_async("jaxlsp/trace", {**params, "answers": answers}), 300)
    assert done["summary"]["outputs"] == ["f32[3]"], done  # the sizes answered, not the symbols again
