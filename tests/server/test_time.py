"""Measured time from the editor over stdio (issue 28): ``time: true`` on jaxlsp/trace, its summary,
the line's time and share in hover, and bad ``repeat`` params refused.

A real capture (JAX on CPU) of ``tests/workspaces/timing``: a 4-layer MLP whose second layer is
much the widest; one server for the whole flow.
"""

from __future__ import annotations

import re

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.server.conftest import JaxClient, trusted_session

INVALID_PARAMS = -32602


client = trusted_session("timing")


async def test_a_timed_trace_measures_the_step_and_hover_shows_each_lines_share(client: JaxClient) -> None:
    uri = client.open("timed_models.py")
    trace = {"textDocument": {"uri": uri}, "name": "MLP", "time": True, "repeat": 2}
    result = client.plain(await client.within(client.request("jaxlsp/trace", trace), 240))
    time = result["time"]
    assert time["repeat"] == 2 and time["device"] == "cpu" and time["step"] > 0
    assert time["busy"] > 0 and time["attributed"] >= 0.9 * time["busy"]
    rows = time["modules"]
    assert rows[0]["module"] == "MLP/Dense_1"  # the widest layer first
    assert sum(r["seconds"] for r in rows) == pytest.approx(time["step"], rel=0.01)

    # The Dense layers' line (13) holds the matmuls: most of the step, in hover's words.
    hover = await client.within(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(12, 18))
        )
    )
    assert hover is not None
    text = hover.contents.value if isinstance(hover.contents, types.MarkupContent) else str(hover.contents)
    found = re.search(r"time: ([\d.]+) (ms|µs|s) · (\d+) % of the step \(measured, 2 runs\)", text)
    assert found is not None, text
    assert int(found.group(3)) >= 50

    for bad, message in (({"repeat": 0}, "repeat: expected a number of runs from 1 to 1000"),
                         ({"time": False, "repeat": 3}, "repeat: goes with time: true")):  # fmt: skip
        with pytest.raises(JsonRpcException) as raised:
            await client.within(client.request("jaxlsp/trace", {**trace, **bad}))
        assert raised.value.code == INVALID_PARAMS and message in str(raised.value.message), raised.value
