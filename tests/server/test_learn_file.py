"""``jaxlsp.learnShapes`` on one file over stdio (issue 56): only the test files whose imports reach
it run (tests/workspaces/learn_reach: not the unrelated one that sleeps ten minutes), the answer
lists them nearest first, a budget bounds the run, and asking again runs nothing that is still
valid."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.server.conftest import JaxClient, trusted_session
from tests.server.test_live import CONFIG

learner = trusted_session("learn_reach", "learner", CONFIG, {"trusted": True})  # live shapes on


async def _learn(client: JaxClient, argument: dict[str, Any]) -> dict[str, Any]:
    params = types.ExecuteCommandParams("jaxlsp.learnShapes", [argument])
    answer: dict[str, Any] = client.plain(await client.within(client.workspace_execute_command_async(params), 300))
    return answer


async def test_learn_on_a_file_runs_only_the_tests_that_import_it_and_a_second_learn_runs_nothing(
    learner: JaxClient,
) -> None:
    client = learner
    layers = (client.workspace / "pkg" / "layers.py").as_uri()
    result = await _learn(client, {"uri": layers, "budget": 240})
    assert [(e["text"], e["outcome"]) for e in result["examples"]] == [
        ("tests/test_layers.py", "finished"),
        ("tests/test_blocks.py", "finished"),
    ]
    assert {"pkg/layers.py::dense", "pkg/blocks.py::block"} <= set(result["targets"])
    assert (result["ran"], result["cached"]) == (2, 0) and "stopped" not in result

    again = await _learn(client, {"uri": layers})
    assert (again["ran"], again["cached"]) == (0, 2)
    assert again["targets"] == result["targets"]


async def test_a_file_no_example_imports_and_a_bad_budget_are_refused(learner: JaxClient) -> None:
    client = learner
    (client.workspace / "pkg" / "unused.py").write_text("X = 1\n")
    with pytest.raises(JsonRpcException, match="no test file or documented script imports"):
        await _learn(client, {"uri": (client.workspace / "pkg" / "unused.py").as_uri()})
    with pytest.raises(JsonRpcException, match="budget"):
        await _learn(client, {"uri": (client.workspace / "pkg" / "layers.py").as_uri(), "budget": 0})
