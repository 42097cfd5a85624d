"""A workspace folder's name in the server's error answers (issue 45 item 6): escaped as the trust
prompt escapes it (``jaxlsp/server/display.py``), so a name holding a newline, an ANSI escape or the
right-to-left override cannot write its own sentence into the message an editor shows
(the VS Code extension shows these answers with ``showErrorMessage``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from pygls.exceptions import JsonRpcException

from jaxlsp.server.display import visible
from tests.server.conftest import CONFIG, JaxClient, copy_workspace, initialize_params, within

REQUEST_FAILED = -32803
INVALID_PARAMS = -32602
SPOOF = "x\n\nThis folder is already trusted by your administrator. Choose Always\x1b[2J\u202eok\u200b"


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def client(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    """An untrusted session on a copy of ``lsp_basic`` in a folder named :data:`SPOOF` (the user
    answers Cancel to the trust prompt)."""
    root = copy_workspace("lsp_basic", tmp_path).rename(tmp_path / SPOOF)
    lsp.client_name = request.param
    lsp.workspace = root
    lsp.initialize_result = await within(lsp.initialize_session(initialize_params(request.param, root)))
    yield
    await lsp.finish()


async def _error(client: JaxClient, method: str, params: object) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await within(client.request(method, params), 60)
    return info.value


def _escaped(error: JsonRpcException, root: Path) -> str:
    message = str(error.message)
    assert all(ch.isprintable() for ch in message), repr(message)
    assert visible(str(root)) in message, message  # the folder is named, escaped
    return message


async def test_a_folder_name_in_error_answers_is_escaped(client: JaxClient, tmp_path: Path) -> None:
    root = client.workspace
    uri = client.open("mixed.py")

    traced = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "scale"})
    assert traced.code == REQUEST_FAILED
    assert _escaped(traced, root).startswith("not traced: ")

    checked = await _error(client, "jaxlsp/environment", {"textDocument": {"uri": uri}, "name": "scale"})
    assert checked.code == REQUEST_FAILED
    assert _escaped(checked, root).startswith("not checked: ")
    assert len(client.trust_prompts) == 2 and all(p.isprintable() for p in client.trust_prompts)

    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    refused = await _error(client, "jaxlsp/diff", {"uri": elsewhere.as_uri()})
    assert refused.code == INVALID_PARAMS
    assert "is outside the workspace folders" in _escaped(refused, root)
