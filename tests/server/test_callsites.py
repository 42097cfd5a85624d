"""Inputs from the workspace's own call sites, from the editor: a lens on a target without a
profile traces its best complete static call site at once; when only runnable examples are left
the needs-input answer lists them, and one pick runs it (trusted), with save; an untrusted
workspace runs none of them. On a copy of tests/workspaces/callsites_repo."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pygls.exceptions import JsonRpcException

from tests.server.conftest import CONFIG, JaxClient, copy_workspace, initialize_params, within

REQUEST_FAILED = -32803


def session(name: str, trusted: bool) -> Any:
    @pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"], name=name)
    async def fixture(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
        root = copy_workspace("callsites_repo", tmp_path)
        lsp.client_name = request.param
        lsp.workspace = root
        params = initialize_params(request.param, root)
        params.initialization_options = {"jaxlsp": {"liveShapes": False, "trusted": True}} if trusted else None
        lsp.initialize_result = await within(lsp.initialize_session(params))
        yield
        await lsp.finish()

    return fixture


trusted = session("trusted", trusted=True)
untrusted = session("untrusted", trusted=False)


async def trace(client: JaxClient, target: str, **extra: Any) -> Any:
    rel, _, name = target.partition("::")
    params = {"textDocument": {"uri": client.uri(rel)}, "name": name, **extra}
    # an example runs a whole test up to the call: more than JaxClient.request's 10 s on a busy machine
    return client.plain(await within(client.protocol.send_request_async("jaxlsp/trace", params), 300))


async def test_the_lens_traces_a_complete_static_call_site(trusted: JaxClient) -> None:
    result = await trace(trusted, "zoo/transformer.py::TransformerLM")
    assert result["inputsFrom"] == "tests/test_models.py:35 (test)"
    assert result["summary"]["outputs"] == ["f32[2,8,32]"] and "saved" not in result


async def test_runnable_examples_are_choices_and_one_pick_traces_and_saves(trusted: JaxClient) -> None:
    client = trusted
    asked = await trace(client, "zoo/resnet.py::ResNetBlock")
    assert asked["needsInput"]  # the manual answers stay available
    assert [(c["example"], c["kind"], c["static"]) for c in asked["examples"]] == [
        ("tests/test_models.py::test_resnet18", "test", False),
        ("train.py", "script", False),
    ]
    assert asked["examples"][0]["via"].startswith("through ResNet")
    assert not (client.workspace / "jaxlsp.toml").exists()

    picked = await trace(client, "zoo/resnet.py::ResNetBlock", example=asked["examples"][0]["example"], save=True)
    assert picked["inputsFrom"] == "zoo/resnet.py:57 (test)"
    assert picked["saved"] == (client.workspace / "jaxlsp.toml").as_uri()
    saved = tomllib.loads((client.workspace / "jaxlsp.toml").read_text())["profiles"]["ResNetBlock"]
    assert saved["target"] == "zoo/resnet.py::ResNetBlock" and saved["init"]["kwargs"]["filters"] == 4

    again = await trace(client, "zoo/resnet.py::ResNetBlock")  # the saved profile: nothing runs
    assert again["profile"] == "ResNetBlock" and "inputsFrom" not in again


async def test_an_example_that_never_reaches_the_target_is_an_error(trusted: JaxClient) -> None:
    with pytest.raises(JsonRpcException) as info:
        await trace(trusted, "zoo/functions.py::unreachable", example="tests/test_models.py::test_never_reaches")
    assert info.value.code == REQUEST_FAILED
    assert "running tests/test_models.py::test_never_reaches finished without calling unreachable" in str(info.value)


async def test_an_untrusted_workspace_runs_no_example(untrusted: JaxClient) -> None:
    client = untrusted
    client.trust_answer = "Cancel"
    with pytest.raises(JsonRpcException) as info:
        await trace(
            client, "zoo/functions.py::never_called_statically", example="tests/test_models.py::test_prints_and_writes"
        )
    assert "is not trusted" in str(info.value)
    assert not (client.workspace / "written_by_test.txt").exists()  # the example never ran
