"""A model its tests call with batch 3 in one file and 5 in another shows a symbol in the batch
position after ``jaxlsp.learnShapes``, with the dtype the tests computed (NumPy int64 tokens under
x64 off: float32), and its hover says the sizes it was learned at (issue 56.5 and 56.8)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from tests.server.conftest import JaxClient, trusted_session
from tests.server.test_live import CONFIG, hover, line_of, settled

pytest.importorskip("flax")
pytest.importorskip("equinox")

learner = trusted_session("learned_batches", "learner", CONFIG, {"trusted": True}, ("__pycache__", "README.md"))


async def test_a_batch_learned_at_3_and_5_is_a_symbol_with_the_tests_dtype_and_its_sizes(learner: JaxClient) -> None:
    client = learner
    answer = await client.within(
        client.workspace_execute_command_async(types.ExecuteCommandParams("jaxlsp.learnShapes", [{}])), 600
    )
    result = client.plain(answer)
    assert "tagger/models.py::Tagger" in result["targets"] and result["failures"] == []
    client.open("tagger/models.py")
    assert (await settled(client, "Tagger"))["state"] == "fresh"
    text = await hover(
        client, "tagger/models.py", line_of(client, "tagger/models.py", "return nn.Dense(self.vocab)(x)")
    )
    assert "f32[batch,4,11]" in text, text  # float32 as the tests computed, not f64; batch a symbol
    assert "batch = 3, 5 in the learned calls" in text, text
    assert (await settled(client, "masked_mean"))["state"] == "fresh"
    text = await hover(client, "tagger/models.py", line_of(client, "tagger/models.py", "kept = jnp.where"))
    assert "f32[rows,6]" in text and "rows = 3, 5 in the learned calls" in text, text  # the annotation's name
