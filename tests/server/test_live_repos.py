"""Live shapes on the layouts of real repositories (issue 27, /work/repos/LIVE_NOTE.md), over stdio
on ``tests/workspaces/lsp_live_repos``: a call site that downloads a checkpoint never feeds a live
trace (bonsai), nor does a capture that wants the network, and a call site in a test file
imports beside it (equimo) when the user's trace uses it.

Real captures (JAX on CPU); ``hub.py``'s ``from_pretrained`` writes a line to ``DOWNLOADS`` each
time it runs, which counts what really ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_lsp

from tests.server.conftest import JaxClient, copy_workspace, initialize_params
from tests.server.test_live import CONFIG, TRACE_WAIT, hover, line_of, save, settled


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def live(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    root = copy_workspace("lsp_live_repos", tmp_path)
    lsp.client_name = request.param
    lsp.workspace = root
    params = initialize_params(request.param, root)
    params.initialization_options = {"jaxlsp": {"trusted": True}}
    lsp.initialize_result = await lsp.within(lsp.initialize_session(params))
    yield
    await lsp.finish()


def downloads(client: JaxClient) -> list[str]:
    log = client.workspace / "DOWNLOADS"
    return log.read_text().split() if log.exists() else []


async def test_a_call_site_that_downloads_a_checkpoint_is_not_used_by_a_live_trace(live: JaxClient) -> None:
    """bonsai's models/dinov3: opening modeling.py traced ``forward`` with run_model.py's
    ``Dinov3ViTModel.from_pretrained(...)``, a Hub download on every open."""
    client = live
    uri = client.open("hub.py")
    why = await settled(client, "forward", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive", why
    assert "Model.from_pretrained(...)" in why["reason"] and "scripts/run_model.py:11" in why["reason"], why
    assert downloads(client) == []  # nothing ran
    assert not [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp"]

    # The user's own trace may use the site; then saves re-trace it live.
    params = {"textDocument": {"uri": uri}, "name": "forward"}
    picked = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT)
    assert picked["summary"]["outputs"] == ["f32[2,3]"] and downloads(client) == ["org/tiny-pretrained"]
    text = (client.workspace / "hub.py").read_text()
    save(client, "hub.py", text.replace("jnp.tanh(y)", "jnp.tanh(y) * 2.0"))
    await settled(client, "forward", after=picked["traceId"])


async def test_a_live_trace_that_wants_the_network_is_refused_and_not_live(live: JaxClient) -> None:
    """What no name shows: ``Store.open(...)`` connects to a server. The live capture refuses the
    connection at once (no DNS, no timeout) and the target is not live, with why; no diagnostic."""
    client = live
    uri = client.open("remote.py")
    why = await settled(client, "predict", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive", why
    assert "needs the network (it tried to reach tiny.weights.invalid:443)" in why["reason"], why
    assert not [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp"]


async def test_a_call_site_in_a_test_file_imports_the_modules_beside_it(live: JaxClient) -> None:
    """equimo's tests/test_generic.py hands BlockChunk a class of its own (``ref =
    "test_generic:_SimpleBlock"``), and tests/finetune's tests import their sibling fixtures.py:
    pytest puts the test file's folder on sys.path, and the trace must too. Building those inputs
    imports the test module, which ``chunked.py`` does not import: the user's trace does that, a
    live one does not until then (issue 45 item 4)."""
    client = live
    uri = client.open("chunked.py")
    why = await settled(client, "apply", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive" and "test_chunk:_block" in why["reason"], why
    params = {"textDocument": {"uri": uri}, "name": "apply"}
    picked = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT)
    assert picked["summary"]["outputs"] == ["f32[10]"], picked
    assert "f32[3,10]" in await hover(client, "chunked.py", line_of(client, "chunked.py", "y = block(x)"))
