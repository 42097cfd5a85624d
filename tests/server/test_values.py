"""Values runs from the editor over stdio: ``values: true`` on jaxlsp/trace, the first non-finite
value's diagnostic and its code action, hover statistics, and ``jaxlsp/values`` (answered from a
values trace, or running a shapes-only trace's target again for its arrays).

Real captures (JAX on CPU) of ``tests/workspaces/lsp_values``; one server per test, each test
checking a whole flow, so the suite starts few servers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.graph.report import figure
from tests.server.conftest import JaxClient, trusted_session

REQUEST_FAILED = -32803
BLOWUP = "first non-finite (nan): sqrt at model.py:8, scan iteration 7, input min -1.0"


client = trusted_session("lsp_values")


async def _call(client: JaxClient, method: str, params: Any) -> Any:
    return client.plain(await client.within(client.request(method, params), 120))


async def test_a_values_trace_finds_the_first_nan_and_shows_it_where_the_user_looks(client: JaxClient) -> None:
    uri = client.open("model.py")
    result = await _call(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "blowup", "values": True})
    values = result["values"]
    assert values["validation"] == "verified" and values["values"] > 0
    first = values["firstNonFinite"]
    assert first["message"] == BLOWUP and first["primitive"] == "sqrt" and first["kind"] == "nan"
    assert first["location"]["uri"] == uri and first["location"]["range"]["start"]["line"] == 7

    # A warning at that line, with the same text, whose code action opens the graph at the node.
    await client.wait_until(lambda: bool(client.diagnostics.get(uri)))
    (diagnostic,) = client.diagnostics[uri]
    assert diagnostic.message == BLOWUP and diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.code == "non-finite" and diagnostic.range.start.line == 7
    actions = await client.within(
        client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic]),
            )
        )
    )
    reveal = next(a for a in actions or [] if isinstance(a, types.CodeAction) and a.title.startswith("Reveal"))
    assert reveal.title == f"Reveal sqrt ({first['nodeId']}) in the graph" and reveal.is_preferred
    assert reveal.command is not None and reveal.command.command == "jaxlsp.openGraph"
    argument = client.plain(reveal.command.arguments)[0]
    assert argument == {"traceId": result["traceId"], "nodeId": first["nodeId"]}
    opened = await _call(client, "jaxlsp/openGraph", argument)
    assert f"node={first['nodeId']}" in opened["url"] and f"trace={result['traceId']}" in opened["url"]

    # Hover on the line: the statistics beside the shapes, over the sqrt's 8 runs: the square roots
    # of 5, 4, 3, 2, 1, 0 (three of each) and six NaN.
    hover = await client.within(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(7, 20))
        )
    )
    assert hover is not None
    text = hover.contents.value if isinstance(hover.contents, types.MarkupContent) else str(hover.contents)
    roots = np.sqrt(np.repeat(np.arange(6.0), 3))
    assert f"`sqrt` → `f32[3] · mean {figure(roots.mean())} · std {figure(roots.std())} · 6 NaN`" in text, text
    assert BLOWUP in text

    # jaxlsp/values answers from the trace: the node's inputs and outputs, no second run.
    got = await _call(client, "jaxlsp/values", {"traceId": result["traceId"], "nodes": [first["nodeId"]]})
    assert got["validation"]["status"] == "verified" and got["firstNonFinite"]["message"] == BLOWUP
    output = got["stats"][first["valueId"]]
    assert output["nan"] == 6 and output["iterations"] == 8 and output["firstNonFiniteIteration"] == [7]
    assert len(got["stats"]) == 2  # the sqrt's one input and one output

    # The traced entrypoint's lenses: "Trace graph", "Open graph" and "Trace with values".
    lenses = [lens for lens in await client.lenses(uri) if lens.data["name"] == "blowup"]
    titles = [(await client.within(client.code_lens_resolve_async(lens))).command.title for lens in lenses]
    assert titles[1:] == ["Open graph", "Trace with values"]


async def test_values_of_a_shapes_only_trace_run_it_again_and_send_small_arrays(client: JaxClient) -> None:
    uri = client.open("model.py")
    plain = await _call(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict"})
    assert "values" not in plain
    page = await _call(client, "jaxlsp/graph", {"traceId": plain["traceId"]})
    out = next(item for item in page["items"] if item["primitive"] == "reduce_sum")["outputs"][0]
    assert "stats" not in out
    got = await _call(client, "jaxlsp/values", {"traceId": plain["traceId"], "values": [out["id"]], "inline": True})
    assert got["validation"]["status"] == "verified" and "firstNonFinite" not in got
    array = got["arrays"][out["id"]]
    assert array["shape"] == [2] and array["dtype"] == "float32" and len(array["data"]) == 2
    stats = got["stats"][out["id"]]
    assert stats["count"] == 2 and stats["min"] == pytest.approx(min(array["data"]), rel=1e-6)
    # The trace itself now has the statistics: pages and nodes show them.
    page = await _call(client, "jaxlsp/graph", {"traceId": plain["traceId"]})
    out = next(item for item in page["items"] if item["primitive"] == "reduce_sum")["outputs"][0]
    assert out["stats"]["mean"] == pytest.approx(sum(array["data"]) / 2, rel=1e-5)

    # A traced symbolic dimension has no size: a values run asks for it, then runs with it.
    with pytest.raises(JsonRpcException) as info:
        await _call(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "anysize", "values": True})
    assert info.value.code == REQUEST_FAILED and "--dim n=SIZE" in info.value.message
    assert client.plain(info.value.data) == {"kind": "needs_input", "dims": ["n"]}
    sized = await _call(
        client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "anysize", "values": True, "dims": {"n": 5}}
    )
    assert sized["values"]["validation"] == "verified" and sized["summary"]["outputs"] == ["f32[]"]
