"""``jaxlsp.learnShapes`` over stdio (issue 46): one command runs the workspace's own tests once,
with progress; afterwards the blocks, layers and helpers that only the tests' models call have
live shapes with no click and no question, and what was learned outlives the server (a later
process, here the CLI, traces with it)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types

from tests import deadlines
from tests.server.conftest import SERVER_ENV, JaxClient, initialize_params
from tests.server.test_live import CONFIG, TRACE_WAIT, hover, line_of, save, settled, state

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "signatures"


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def learner(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    root = (tmp_path / "signatures").resolve()
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__", "jaxlsp.toml", "README.md"))
    lsp.client_name = request.param
    lsp.workspace = root
    params = initialize_params(request.param, root)
    params.initialization_options = {"jaxlsp": {"trusted": True}}
    lsp.initialize_result = await lsp.within(lsp.initialize_session(params))
    yield
    await lsp.finish()


async def test_one_learn_gives_every_nested_target_live_shapes(learner: JaxClient) -> None:
    client = learner
    client.open("tinylm/layers.py")
    before = await settled(client, "Attention", ("notLive", "fresh", "failed"))
    assert before["state"] == "notLive"  # only its parent calls it, and nothing ran yet

    answer = await client.within(
        client.workspace_execute_command_async(types.ExecuteCommandParams("jaxlsp.learnShapes", [{}])), 600
    )
    result = client.plain(answer)
    assert result["learned"] >= 9 and "tinylm/layers.py::Attention" in result["targets"]
    assert [(e["text"], e["outcome"]) for e in result["examples"]] == [("tests/test_model.py", "finished")]
    assert result["failures"] == []
    assert any("1/1 examples" in str(v) for v in client.progress_reports.values())
    assert client.trust_prompts == []  # the editor's trust covers the folder: nothing asked

    shown = await settled(client, "Attention")  # traced again on what was learned, no click
    assert shown["state"] == "fresh"
    at = line_of(client, "tinylm/layers.py", "scores = jnp.einsum")
    assert "f32[2,2,8,8]" in await hover(client, "tinylm/layers.py", at)
    assert (await settled(client, "rms_norm"))["state"] == "fresh"
    assert state(client, "FeedForward") is not None

    # kept in the per-user cache, not in the server: another process (the CLI) traces with it
    cli = deadlines.run(
        [sys.executable, "-m", "jaxlsp", "trace", "tinylm/layers.py::FeedForward"],
        300,
        cwd=client.workspace,
        env={**os.environ, "XDG_CACHE_HOME": SERVER_ENV["XDG_CACHE_HOME"]},
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert "inputs from a learned call at tinylm/layers.py:53 (learned)" in cli.stdout.splitlines()
    assert not list(client.workspace.rglob("*.json"))  # nothing was written into the workspace


async def test_a_save_inside_a_nested_module_re_traces_it_and_its_caller_shows_the_new_shape(
    learner: JaxClient,
) -> None:
    """After one learn, an edit inside ``Attention`` (which only ``Block`` calls) re-traces it on
    its learned call with no click, and the caller that no longer fits its new output shape says
    so at its own line: the shape error shows where ``Attention`` is called."""
    client = learner
    uri = client.open("tinylm/layers.py")
    await client.within(
        client.workspace_execute_command_async(types.ExecuteCommandParams("jaxlsp.learnShapes", [{}])), 600
    )
    first = await settled(client, "Attention")
    assert (await settled(client, "Block"))["state"] == "fresh"
    text = (client.workspace / "tinylm/layers.py").read_text()
    old = ".reshape(x.shape)"
    assert text.count(old) == 1
    save(client, "tinylm/layers.py", text.replace(old, ".reshape(x.shape[:-1] + (x.shape[-1] // 2, 2))"))

    again = await settled(client, "Attention", after=first["traceId"])
    assert again["state"] == "fresh"  # its own trace, on the inputs Block gave it
    returned = line_of(client, "tinylm/layers.py", 'return jnp.einsum("bhts')
    assert "f32[2,8,8,2]" in await hover(client, "tinylm/layers.py", returned)
    assert (await settled(client, "Block", ("failed",)))["state"] == "failed"
    caller = line_of(client, "tinylm/layers.py", "x = x + Attention(self.config)")
    await client.wait_until(
        lambda: any(d.source == "jaxlsp" and d.range.start.line == caller for d in client.diagnostics.get(uri, [])),
        TRACE_WAIT,
    )
    (shown,) = [d for d in client.diagnostics[uri] if d.source == "jaxlsp" and d.range.start.line == caller]
    assert shown.severity == types.DiagnosticSeverity.Error
    assert "8, 8, 2" in shown.message or "(2, 8, 16)" in shown.message, shown.message
