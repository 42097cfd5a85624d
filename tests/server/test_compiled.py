"""The compiled program from the editor over stdio (issue 28): ``compiled: true`` on jaxlsp/trace
and the "Trace compiled" code action answer the ``collectives:`` line with the collective
attributed to the user's line, and the per-module rows.

Real captures (JAX on CPU, 4 virtual devices) of ``tests/workspaces/compiled``; one server for
the whole flow."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.conftest import JaxClient, trusted_session

pytest.importorskip("jax")


client = trusted_session("compiled")


def _line(root: Path, file: str, needle: str) -> int:
    lines = (root / file).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


async def test_compiled_trace_and_its_code_action_name_the_collectives_line(client: JaxClient) -> None:
    uri = client.open("sharded.py")
    line = _line(client.workspace, "sharded.py", "c = a @ b")
    params = {"textDocument": {"uri": uri}, "name": "matmul", "profile": "contracting", "compiled": True}
    result = client.plain(await client.within(client.request("jaxlsp/trace", params), 180))
    compiled = result["compiled"]
    assert compiled["collectives"] == f"collectives: all-reduce \u00d71 (512 B) at sharded.py:{line}"
    assert compiled["groups"] == [
        {"kind": "all-reduce", "where": f"sharded.py:{line}", "scope": "", "count": 1, "bytes": 512}
    ]
    assert compiled["devices"] == 4 and compiled["text"][0] == compiled["collectives"]
    assert compiled["modules"][0]["scope"] == "" and compiled["modules"][0]["collectiveBytes"] == 512
    assert compiled["peakBytes"] > 0

    # The same from the code action on the def line: "Trace compiled: summed" runs its command.
    def_line = _line(client.workspace, "sharded.py", "def summed(") - 1
    actions = await client.actions(uri, def_line)
    action = next(a for a in actions if a.title == "Trace compiled: summed")
    assert action.command is not None and action.command.command == "jaxlsp.traceCompiled"
    argument = {**client.plain(action.command.arguments)[0], "profile": "psum"}
    answer = client.plain(
        await client.within(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="jaxlsp.traceCompiled", arguments=[argument])
            ),
            180,
        )
    )
    psum = _line(client.workspace, "sharded.py", "jax.lax.psum(")
    assert answer["compiled"]["collectives"] == f"collectives: all-reduce \u00d71 (128 B) at sharded.py:{psum}"

    # A trace without compiled answers no compiled summary.
    plain = client.plain(await client.within(client.request("jaxlsp/trace", {**params, "compiled": False}), 180))
    assert "compiled" not in plain
