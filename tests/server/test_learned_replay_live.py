"""Live shapes from a learned example (issue 56.7): an ODE-like ``solve(term, y0)`` whose test hands
it a term holding a Python function is not live before learning (no recipe can spell its call, and
no example runs that the user did not choose); after ``jaxlsp.learnShapes`` the test that made the
call is replayed up to it, with no click, and its lines show the call's shapes."""

from __future__ import annotations

from lsprotocol import types

from tests.server.conftest import JaxClient, trusted_session
from tests.server.test_live import CONFIG, hover, line_of, settled

learner = trusted_session("learned_replay", "learner", CONFIG, {"trusted": True}, ("__pycache__", "README.md"))


async def test_a_call_no_recipe_can_spell_is_live_from_the_test_that_made_it(learner: JaxClient) -> None:
    client = learner
    client.open("odelike/solve.py")
    before = await settled(client, "solve", ("notLive", "fresh", "failed"))
    assert before["state"] == "notLive"  # its one call holds a lambda, and nothing ran yet

    answer = await client.within(
        client.workspace_execute_command_async(types.ExecuteCommandParams("jaxlsp.learnShapes", [{}])), 600
    )
    result = client.plain(answer)
    assert result["targets"] == ["odelike/solve.py::solve"] and result["failures"] == []

    shown = await settled(client, "solve")
    assert shown["state"] == "fresh", shown
    text = await hover(client, "odelike/solve.py", line_of(client, "odelike/solve.py", "return jnp.stack"))
    assert "f32[2,3,5]" in text, text  # the test's own call: ones((3, 5)), two states stacked
