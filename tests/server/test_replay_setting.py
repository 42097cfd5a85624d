"""The ``replay`` setting over stdio: a Linen model's repeated layers are traced once by default
(``jaxlsp/trace`` says how many calls replayed), and ``initializationOptions.jaxlsp.replay:
false`` traces every call; the graphs are the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_lsp

from tests.server.conftest import CONFIG, JaxClient, copy_workspace, initialize_params, within

pytest.importorskip("flax")


def replay_session(name: str, replay: bool | None) -> Any:
    @pytest_lsp.fixture(config=CONFIG, params=["neovim"], name=name)
    async def fixture(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
        root = copy_workspace("lsp_replay", tmp_path / name)
        lsp.client_name = request.param
        lsp.workspace = root
        params = initialize_params(request.param, root)
        options: dict[str, Any] = {"liveShapes": False, "trusted": True}
        if replay is not None:
            options["replay"] = replay
        params.initialization_options = {"jaxlsp": options}
        lsp.initialize_result = await within(lsp.initialize_session(params))
        yield
        await lsp.finish()

    return fixture


replaying = replay_session("replaying", None)
every_call = replay_session("every_call", False)


async def _trace_and_page(client: JaxClient) -> tuple[Any, Any]:
    uri = client.uri("stack.py")
    request = {"textDocument": {"uri": uri}, "name": "Stack", "profile": "stack"}
    result = client.plain(await client.within(client.request("jaxlsp/trace", request), 180))
    page = client.plain(
        await client.within(client.request("jaxlsp/graph", {"traceId": result["traceId"], "limit": 5000}), 60)
    )
    return result, page


def _essence(page: Any) -> Any:
    return page["items"]  # the graph's top level: its groups and nodes, with their shapes


async def test_replay_is_on_by_default_and_off_traces_every_call_to_the_same_graph(
    replaying: JaxClient, every_call: JaxClient
) -> None:
    result, page = await _trace_and_page(replaying)
    assert result["replayed"] == 5  # Block_1 ... Block_5 repeat Block_0
    off, off_page = await _trace_and_page(every_call)
    assert "replayed" not in off
    assert off["summary"] == result["summary"]
    assert _essence(off_page) == _essence(page) and page["items"]
