"""Needs-input answered from the editor, the completed profile saved into jaxlsp.toml on request,
and the phases a trace reports as work-done progress. Real captures of ``tests/workspaces/lsp_trace``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from lsprotocol import types

from tests.server.conftest import JaxClient
from tests.server.test_tracing import INVALID_PARAMS, _error, _trace, tracing_session

trusted = tracing_session("trusted", ["visual-studio-code"], trusted=True)

SHAPE = "profiles.needs.inputs.args[0].shape"
DIMMED = """
# a profile whose batch size is asked for (this comment must survive)
[profiles.dimmed]
target = "model.py::predict"
inputs.args = [{ kind = "array", shape = [3, 4] }, { kind = "array", shape = ["batch", 3] }]  # x
"""


def _recipe(client: JaxClient) -> Path:
    return client.workspace / "jaxlsp.toml"


async def test_answers_trace_without_saving(trusted: JaxClient) -> None:
    client = trusted
    before = _recipe(client).read_bytes()
    asked = await _trace(client, "needs")
    assert [item["path"] for item in asked["needsInput"]] == [SHAPE]

    result = await _trace(client, "needs", answers={SHAPE: [2, 5]})
    assert result["summary"]["outputs"] == ["f32[2,5]"] and "saved" not in result
    assert _recipe(client).read_bytes() == before  # not asked to save: nothing written


async def test_save_appends_the_proposal_and_keeps_every_byte(trusted: JaxClient) -> None:
    client = trusted
    before = _recipe(client).read_text()
    result = await _trace(client, "needs", answers={SHAPE: [2, 5]}, save=True)
    assert result["saved"] == _recipe(client).resolve().as_uri()
    after = _recipe(client).read_text()
    assert after.startswith(before.rstrip("\n") + "\n\n[profiles.needs]")
    saved = tomllib.loads(after)["profiles"]["needs"]
    assert saved["target"] == "model.py::needs" and saved["inputs"]["args"][0]["shape"] == [2, 5]

    again = await _trace(client, "needs")  # the saved profile now answers by itself
    assert again["profile"] == "needs" and again["summary"]["outputs"] == ["f32[2,5]"]


async def test_save_sets_a_missing_dimension_in_place(trusted: JaxClient) -> None:
    client = trusted
    recipe = _recipe(client)
    recipe.write_text(recipe.read_text() + DIMMED)
    asked = await _trace(client, "predict", profile="dimmed")
    assert [item["path"] for item in asked["needsInput"]] == ["profiles.dimmed.dims.batch"]

    result = await _trace(client, "predict", profile="dimmed", answers={"profiles.dimmed.dims.batch": 2}, save=True)
    assert result["summary"]["outputs"] == ["f32[2]"] and "saved" in result
    text = recipe.read_text()
    assert "# a profile whose batch size is asked for (this comment must survive)" in text
    assert '{ kind = "array", shape = ["batch", 3] }]  # x' in text  # formatting kept
    assert tomllib.loads(text)["profiles"]["dimmed"]["dims"] == {"batch": 2}


async def test_unsaved_editor_buffer_is_never_overwritten(trusted: JaxClient) -> None:
    client = trusted
    recipe = _recipe(client)
    before = recipe.read_bytes()
    uri = client.open("jaxlsp.toml")
    client.edit(uri, (0, 0), (0, 0), "# typed but not saved\n")
    result = await _trace(client, "needs", answers={SHAPE: [2, 5]}, save=True)
    assert "saved" not in result and result["summary"]["outputs"] == ["f32[2,5]"]  # the trace still ran
    assert recipe.read_bytes() == before
    await client.wait_until(lambda: any("unsaved changes" in m.message for m in client.messages))


async def test_typed_answers_are_parsed_by_the_server_and_asked_again_with_errors(trusted: JaxClient) -> None:
    """Clients send what the user typed; the server parses it by the recipe's rules (one behaviour
    in every editor) and answers needs-input again, with the message by path, when it does not parse."""
    client = trusted
    again = await _trace(client, "needs", answers={SHAPE: "1.5, 4"})
    assert [item["path"] for item in again["needsInput"]] == [SHAPE]
    assert set(again["errors"]) == {SHAPE} and '"1.5"' in again["errors"][SHAPE], again
    assert "positive integer nor a dimension name" in again["errors"][SHAPE]
    result = await _trace(client, "needs", answers={SHAPE: "(2, 5)"})
    assert result["summary"]["outputs"] == ["f32[2,5]"]
    # Saved, the profile holds the parsed value, never the typed text.
    saved = await _trace(client, "needs", answers={SHAPE: "2 5"}, save=True)
    assert "saved" in saved
    assert tomllib.loads(_recipe(client).read_text())["profiles"]["needs"]["inputs"]["args"][0]["shape"] == [2, 5]


async def test_a_typed_dimension_is_parsed_and_saved_as_a_number(trusted: JaxClient) -> None:
    client = trusted
    recipe = _recipe(client)
    recipe.write_text(recipe.read_text() + DIMMED)
    batch = "profiles.dimmed.dims.batch"
    again = await _trace(client, "predict", profile="dimmed", answers={batch: "two"})
    assert again["errors"] == {batch: 'expected a positive integer (the dimension\'s size), got "two"'}
    result = await _trace(client, "predict", profile="dimmed", answers={batch: " 2 "}, save=True)
    assert result["summary"]["outputs"] == ["f32[2]"] and "saved" in result
    assert tomllib.loads(recipe.read_text())["profiles"]["dimmed"]["dims"] == {"batch": 2}


async def test_answers_that_do_not_fit_are_refused_by_key(trusted: JaxClient) -> None:
    client = trusted
    uri = client.uri("model.py")
    # A value that parses but does not check comes back by its path, to be asked again.
    again = await _trace(client, "needs", answers={SHAPE: [-2]})
    assert list(again["errors"]) == [SHAPE] and "positive integer" in again["errors"][SHAPE], again
    error = await _error(
        client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "needs", "answers": {"profiles.x.y": "3"}}
    )
    assert "profiles.x.y" in error.message and "not asked for" in error.message
    error = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "needs", "answers": [1]})
    assert error.code == INVALID_PARAMS and "params.answers" in error.message
    error = await _error(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "needs", "save": "yes"})
    assert error.code == INVALID_PARAMS and "params.save" in error.message


async def test_progress_reports_each_phase(trusted: JaxClient) -> None:
    client = trusted
    await _trace(client, "predict")
    traces = [
        reports
        for reports in client.progress_reports.values()
        if reports and isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].title.startswith("Tracing")
    ]
    assert traces
    messages: list[Any] = [getattr(r, "message", None) for r in traces[-1]]
    phases = [m for m in messages if m in {"prepare", "import", "trace", "build"}]
    assert phases == ["prepare", "import", "trace", "build"]
    assert isinstance(traces[-1][-1], types.WorkDoneProgressEnd)
