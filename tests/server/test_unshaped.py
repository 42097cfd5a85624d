"""Every line that computes shows it, and a line without a shape says why (issue 46.5), over stdio
with real live captures of ``tests/workspaces/lsp_unshaped``: a line that calls a helper of the
same file shows what the call computed (hover and inlay hint); a branch not taken, a Python-only
line, a target with no inputs and a target whose trace fails each answer one line with the cause
and the action that would give a shape; the target with no inputs offers ``Learn shapes``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_lsp

from tests.server.conftest import JaxClient, copy_workspace, initialize_params
from tests.server.test_live import CONFIG, hints, hover, line_of, settled

FILE = "vision.py"


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def unshaped(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    root = copy_workspace("lsp_unshaped", tmp_path)
    lsp.client_name = request.param
    lsp.workspace = root
    params = initialize_params(request.param, root)
    params.initialization_options = {"jaxlsp": {"trusted": True, "inlayHints": True}}
    lsp.initialize_result = await lsp.within(lsp.initialize_session(params))
    yield
    await lsp.finish()


async def test_a_call_into_a_helper_of_the_same_file_shows_its_shape(unshaped: JaxClient) -> None:
    client = unshaped
    client.open(FILE)
    assert (await settled(client, "model"))["state"] == "fresh"

    first = await hover(client, FILE, line_of(client, FILE, "x = _block(x, w)"))
    assert "`tanh` → `f32[2,8]`" in first and "`dot_general` → `f32[2,8]`" in first, first
    second = await hover(client, FILE, line_of(client, FILE, "y = _block(x, w[:, :4])"))
    assert "`tanh` → `f32[2,4]`" in second, second
    own = await hover(client, FILE, line_of(client, FILE, "return jnp.tanh(h)"))  # both calls, as before
    assert "`tanh` → `f32[2,8]`" in own and "`tanh` → `f32[2,4]`" in own, own
    assert ": f32[2,8]" in await hints(client, FILE) and ": f32[2,4]" in await hints(client, FILE)


async def test_a_line_without_a_shape_says_why_and_what_would_give_it_one(unshaped: JaxClient) -> None:
    client = unshaped
    uri = client.open(FILE)
    assert (await settled(client, "model"))["state"] == "fresh"
    assert (await settled(client, "broken", ("failed",)))["state"] == "failed"
    assert (await settled(client, "head", ("notLive",)))["state"] == "notLive"

    branch = await hover(client, FILE, line_of(client, FILE, "y = jnp.sum(y * 2.0)"))
    assert branch.startswith("**jaxlsp** · no shape here: the branch was not taken in this trace"), branch
    python = await hover(client, FILE, line_of(client, FILE, "n = x.shape[0]"))
    assert "no shape here: a Python-only line" in python, python
    assert len(python.splitlines()) == 1

    needs = await hover(client, FILE, line_of(client, FILE, "return jnp.mean(x, axis=-1)"))
    assert "no shape here: `head` is not traced: not learned yet (needs input" in needs, needs
    assert "**Learn shapes**" in needs
    failed = await hover(client, FILE, line_of(client, FILE, "return x @ jnp.ones((3, 3))"))
    assert "no shape here: `broken`'s trace failed: " in failed and "fix it and save" in failed, failed
    assert await hover(client, FILE, 0) == ""  # the docstring: outside every target, nothing to say

    # the one action: Learn shapes on the workspace folder, where the tests are
    learn = [a for a in await client.actions(uri, line_of(client, FILE, "def head")) if a.title == "Learn shapes"]
    assert len(learn) == 1 and learn[0].command.command == "jaxlsp.learnShapes"
    assert client.plain(learn[0].command.arguments) == [{"uri": client.workspace.as_uri()}]
    titles = [a.title for a in await client.actions(uri, line_of(client, FILE, "def model"))]
    assert "Learn shapes" not in titles  # live already
