"""Live shapes for a target whose learned call fails at a value check (issue 56): an Equinox
interpolant whose constructor checks its knots' values (``if jnp.any(jnp.diff(x) <= 0)``, as
interpax's ``PPoly`` does) cannot be built from the shapes a learned call spells. After
``jaxlsp.learnShapes`` its live trace replays the test that made the call, with no click, and its
lines show the test's shapes."""

from __future__ import annotations

from lsprotocol import types

from tests.server.conftest import JaxClient, trusted_session
from tests.server.test_live import CONFIG, hover, line_of, settled

learner = trusted_session("learned_checked", "learner", CONFIG, {"trusted": True}, ("__pycache__", "README.md"))


async def test_a_learned_call_that_fails_at_a_value_check_is_live_from_its_test(learner: JaxClient) -> None:
    client = learner
    client.open("checked/spline.py")
    before = await settled(client, "Linear", ("notLive", "fresh", "failed"))
    assert before["state"] != "fresh"  # nothing learned, and its test's call site cannot be built abstractly

    answer = await client.within(
        client.workspace_execute_command_async(types.ExecuteCommandParams("jaxlsp.learnShapes", [{}])), 600
    )
    result = client.plain(answer)
    assert "checked/spline.py::Linear" in result["targets"] and result["failures"] == []

    shown = await settled(client, "Linear")
    assert shown["state"] == "fresh", shown
    text = await hover(client, "checked/spline.py", line_of(client, "checked/spline.py", "return self.y[i]"))
    assert "f32[5]" in text, text  # the test's own call: five query points
