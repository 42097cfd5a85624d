"""``jaxlsp/costs`` and ``jaxlsp/diff`` over stdio, on real captures of a Flax MLP's gradient:
costs per module with the forward / backward split, and what changed after widening a layer, a
no-op edit and a new layer (lens titles and hover too) (issue 18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.graph import io
from tests.server.conftest import CONFIG, JaxClient, copy_workspace, initialize_params, within

REQUEST_FAILED = -32803
INVALID_PARAMS = -32602


@pytest_lsp.fixture(config=CONFIG, name="client")
async def client_fixture(lsp: JaxClient, tmp_path: Path) -> Any:
    root = copy_workspace("lsp_costs", tmp_path)
    lsp.client_name = "visual-studio-code"
    lsp.workspace = root
    params = initialize_params("visual-studio-code", root)
    params.initialization_options = {"jaxlsp": {"liveShapes": False, "trusted": True}}
    lsp.initialize_result = await within(lsp.initialize_session(params))
    yield
    await lsp.finish()


async def _trace(client: JaxClient, **extra: Any) -> dict[str, Any]:
    params = {"textDocument": {"uri": client.uri("model.py")}, "name": "MLP", **extra}
    result: dict[str, Any] = await client.within(client.request("jaxlsp/trace", params), 180)
    return result


def _rewrite(client: JaxClient, old: str, new: str) -> None:
    path = client.workspace / "model.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


async def _error(client: JaxClient, method: str, params: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await client.within(client.request(method, params), 60)
    return info.value


async def _title(client: JaxClient) -> str:
    lens = next(lens for lens in await client.lenses(client.uri("model.py")) if not lens.data.get("open"))
    resolved = await client.within(client.code_lens_resolve_async(lens))
    assert resolved.command is not None
    return str(resolved.command.title)


async def _hover(client: JaxClient, line: int) -> str:
    found = await client.within(
        client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(client.uri("model.py")), types.Position(line, 12))
        )
    )
    assert found is not None
    return str(found.contents.value)  # type: ignore[union-attr]


async def test_costs_per_module_with_the_backward_split(client: JaxClient) -> None:
    caps = client.initialize_result.capabilities.experimental["jaxlsp"]  # type: ignore[union-attr]
    assert caps["costs"] is True and caps["diff"] is True
    plain = await _trace(client)
    unmeasured = await client.request("jaxlsp/costs", {"traceId": plain["traceId"]})
    assert unmeasured["measured"] is False and unmeasured["total"]["flops"] == 0
    assert "no XLA figures" in unmeasured["text"]
    traced = await _trace(client, costs=True)
    costs = await client.request("jaxlsp/costs", {"traceId": traced["traceId"]})
    assert costs["traceId"] == traced["traceId"] and costs["measured"] and costs["gradient"]
    rows = {m["scope"]: m for m in costs["modules"]}
    assert next(iter(rows)) == "MLP"  # the whole model first: largest
    dense0, dense1 = rows["MLP/Dense_0"], rows["MLP/Dense_1"]
    # the product (2 per multiply-add) and the bias add (1 per element)
    assert dense0["forward"]["flops"] == 2 * 2 * 3 * 8 + 2 * 8
    assert dense1["forward"]["flops"] == 2 * 2 * 8 * 4 + 2 * 4
    assert dense0["backward"]["flops"] > 0 and dense1["backward"]["flops"] > 0
    assert (dense0["params"], dense1["params"]) == (3 * 8 + 8, 8 * 4 + 4)
    assert costs["total"]["flops"] == sum(m["flops"] for m in costs["modules"] if m["scope"] in ("MLP", ""))
    assert costs["residuals"]["bytes"] > 0 and costs["memory"]["peakBytes"] > 0
    assert costs["text"].splitlines()[0].split()[:5] == ["module", "params", "FLOPs", "bytes", "share"]
    assert any(row["scope"] == "MLP/Dense_0" for row in costs["precision"])
    limited = await client.request("jaxlsp/costs", {"traceId": traced["traceId"], "limit": 1})
    assert [m["scope"] for m in limited["modules"]] == ["MLP"]
    hover = await _hover(client, 6)  # x = nn.Dense(8)(x)
    assert "costs:" in hover and "FLOPs" in hover and "backward pass" in hover
    assert (await _error(client, "jaxlsp/costs", {"traceId": "nope"})).code == REQUEST_FAILED
    assert (await _error(client, "jaxlsp/costs", {"traceId": traced["traceId"], "limit": 0})).code == INVALID_PARAMS


async def test_diffs_after_a_wider_layer_a_no_op_edit_and_a_new_layer(client: JaxClient, tmp_path: Path) -> None:
    first = await _trace(client)
    assert (await _error(client, "jaxlsp/diff", {"traceId": first["traceId"]})).code == REQUEST_FAILED  # no earlier

    _rewrite(client, "nn.Dense(8)(x)", "nn.Dense(16)(x)")
    wider = await _trace(client)
    found = await client.request("jaxlsp/diff", {"traceId": wider["traceId"]})
    assert found["base"] == first["traceId"] and not found["same"]
    assert found["counts"]["added"] == found["counts"]["removed"] == 0
    assert found["summary"].startswith(f"{found['counts']['changed']} changed; MLP/Dense_0 dot_general f32[2,8]")
    assert "f32[2,8] \u2192 f32[2,16]" in found["summary"]
    first_change = found["changed"][0]
    assert first_change["scope"] == "MLP/Dense_0" and first_change["primitive"] == "dot_general"
    assert {"label": "params/Dense_0/kernel", "before": "f32[3,8]", "after": "f32[3,16]"} in found["inputs"]
    assert (await _title(client)).endswith(found["summary"][:40] + found["summary"][40:90])
    hover = await _hover(client, 6)
    assert "changed here since the last trace" in hover and "f32[2,16]" in hover

    _rewrite(client, "class MLP", "# the same model, lines moved\n\n\nclass MLP")
    moved = await _trace(client)
    same = await client.request("jaxlsp/diff", {"traceId": moved["traceId"]})
    assert same["same"] is True and same["summary"] == "no changes"
    assert same["changed"] == same["added"] == same["removed"] == []
    assert (await _title(client)).endswith(" · no changes")

    _rewrite(
        client, "        return nn.Dense(4)(x)", "        x = nn.relu(nn.Dense(16)(x))\n        return nn.Dense(4)(x)"
    )
    deeper = await _trace(client)
    grown = await client.request("jaxlsp/diff", {"traceId": deeper["traceId"]})
    assert grown["counts"]["added"] > 0 and grown["summary"].startswith(f"+{grown['counts']['added']} ops")
    assert any(n["scope"] == "MLP/Dense_2" for n in grown["added"])
    assert {"label": "params/Dense_2/kernel", "before": None, "after": "f32[16,4]"} in grown["inputs"]

    # any two traces, and graph files
    across = await client.request("jaxlsp/diff", {"traceId": deeper["traceId"], "base": first["traceId"]})
    assert across["base"] == first["traceId"] and across["counts"]["added"] > 0
    exported = await client.request("jaxlsp/export", {"traceId": first["traceId"], "format": "json"})
    files = await client.request("jaxlsp/diff", {"uri": exported["uri"], "baseUri": exported["uri"]})
    assert files["same"] is True and files["traceId"] is None
    lean = client.workspace / "first.json"  # the compact form, as jaxlsp trace -o writes it
    io.write(io.read(Path(unquote(urlparse(exported["uri"]).path))), lean, compact=True)
    both = await client.request("jaxlsp/diff", {"uri": lean.as_uri(), "baseUri": exported["uri"]})
    assert both["same"] is True
    since = await client.request("jaxlsp/diff", {"traceId": deeper["traceId"], "baseUri": lean.as_uri()})
    assert since["counts"] == across["counts"]
    bad = client.workspace / "bad.json"
    bad.write_text("{}")
    error = await _error(client, "jaxlsp/diff", {"traceId": first["traceId"], "baseUri": bad.as_uri()})
    assert error.code == REQUEST_FAILED and "cannot read" in error.message
    outside = tmp_path / "outside.json"  # graph files are read from the workspace and the graph store only
    outside.write_text("{}")
    error = await _error(client, "jaxlsp/diff", {"traceId": first["traceId"], "baseUri": outside.as_uri()})
    assert error.code == INVALID_PARAMS and "params.baseUri" in error.message and "outside" in error.message
    for params in ({}, {"traceId": first["traceId"], "uri": exported["uri"]}, {"traceId": 3}):
        assert (await _error(client, "jaxlsp/diff", params)).code == INVALID_PARAMS
