"""Live shapes over stdio: shapes on hover after only opening a file, saves re-tracing, failure
diagnostics set and cleared by saves, a burst of saves coalescing, nothing in an untrusted
workspace, no example run until the user picks one, and jaxtyping shape contracts.

Real captures (JAX on CPU) of ``tests/workspaces/lsp_live``; no test sends ``jaxlsp/trace``
except where the user's own pick is the point. ``model.py`` and ``tested.py`` add a line to
``IMPORTS`` each time the worker loads them (through a module each imports: a live trace runs a
file's imports, not the rest of its top level), which counts what really ran.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from tests.server.conftest import SERVER_COMMAND, SERVER_ENV, JaxClient, copy_workspace, initialize_params, make_client

TRACE_WAIT = float(
    os.environ.get("JAXLSP_TEST_LIVE_WAIT", "120")
)  # seconds for a live trace on a busy machine: a deadline, not a pace


def _client() -> JaxClient:
    client = make_client()
    client.live = []  # type: ignore[attr-defined]  # every jaxlsp/liveStatus, in order

    @client.feature("jaxlsp/liveStatus")
    def on_live(ls: JaxClient, params: Any) -> None:
        ls.live.append(ls.plain(params))  # type: ignore[attr-defined]
        ls._signal()

    return client  # diagnostics (pytest-lsp keeps them) come before the liveStatus that follows them


CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, client_factory=_client, server_env=SERVER_ENV)


def live_session(name: str, trusted: bool = True, **options: Any) -> Any:
    @pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"], name=name)
    async def fixture(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
        root = copy_workspace("lsp_live", tmp_path)
        lsp.client_name = request.param
        lsp.workspace = root
        params = initialize_params(request.param, root)
        params.initialization_options = {"jaxlsp": {"trusted": trusted, "inlayHints": True, **options}}
        lsp.initialize_result = await lsp.within(lsp.initialize_session(params))
        yield
        await lsp.finish()

    return fixture


live = live_session("live")
untrusted = live_session("untrusted", trusted=False)
off = live_session("off", liveShapes=False)
# The order in which queued targets start is seen one trace at a time (two slots start two at once).
one_slot = live_session("one_slot", liveSlots=1)
two_slots = live_session("two_slots", liveSlots=2)


def state(client: JaxClient, name: str) -> dict[str, Any] | None:
    """The newest liveStatus entry of ``name``."""
    for status in reversed(client.live):  # type: ignore[attr-defined]
        for target in status["targets"]:
            if target["name"] == name:
                return dict(target)
        return None
    return None


def started(client: JaxClient) -> int:
    return int(client.live[-1]["started"]) if client.live else 0  # type: ignore[attr-defined]


def first_traced(client: JaxClient, seen: int) -> str | None:
    """The first target a ``jaxlsp/liveStatus`` after the ``seen`` first ones says is tracing."""
    for status in client.live[seen:]:  # type: ignore[attr-defined]
        for target in status["targets"]:
            if target["state"] == "tracing":
                return str(target["name"])
    return None


async def settled(client: JaxClient, name: str, states: tuple[str, ...] = ("fresh",), after: str | None = None) -> Any:
    """Wait until ``name``'s live state is one of ``states`` (with a trace other than ``after``)."""

    def done() -> bool:
        found = state(client, name)
        return found is not None and found["state"] in states and (after is None or found.get("traceId") != after)

    await client.wait_until(done, TRACE_WAIT)
    return state(client, name)


def line_of(client: JaxClient, rel: str, text: str) -> int:
    lines = (client.workspace / rel).read_text().splitlines()
    return next(i for i, line in enumerate(lines) if text in line)


async def hover(client: JaxClient, rel: str, line: int) -> str:
    result = await client.within(
        client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(client.uri(rel)), types.Position(line, 8))
        )
    )
    return "" if result is None else str(result.contents.value)  # type: ignore[union-attr]


async def hints(client: JaxClient, rel: str) -> list[str]:
    result = await client.within(
        client.text_document_inlay_hint_async(
            types.InlayHintParams(
                types.TextDocumentIdentifier(client.uri(rel)), types.Range(types.Position(0, 0), types.Position(99, 0))
            )
        )
    )
    return [str(h.label) for h in result or []]


def save(client: JaxClient, rel: str, text: str) -> None:
    """What an editor does on save: the new text to the server, the file on disk, didSave."""
    path = client.workspace / rel
    uri = client.uri(rel)
    old = path.read_text().splitlines()
    path.write_text(text)
    client.edit(uri, (0, 0), (len(old) + 1, 0), text)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))


def imports(client: JaxClient, module: str) -> int:
    log = client.workspace / "IMPORTS"
    return log.read_text().split().count(module) if log.exists() else 0


async def test_a_profile_target_has_shapes_on_hover_after_open(live: JaxClient) -> None:
    client = live
    client.open("model.py")
    await settled(client, "layer")
    assert "f32[4,16]" in await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))
    assert "fresh" in await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))
    assert imports(client, "model") >= 1 and client.trust_prompts == []
    assert any("Live shapes: tracing layer" in str(v) for v in client.progress_reports.values())


async def test_each_live_trace_logs_where_its_time_went(live: JaxClient) -> None:
    client = live
    client.open("model.py")
    await settled(client, "layer")

    def logged() -> list[str]:
        return [m.message for m in client.log_messages if m.message.startswith("live layer fresh in ")]

    loop = asyncio.get_running_loop()
    deadline = loop.time() + TRACE_WAIT
    while not logged() and loop.time() < deadline:  # sent right after the status: a deadline, not a pace
        await asyncio.sleep(0.05)
    (line,) = logged()
    spans = dict(part.rsplit(" ", 1) for part in line.split(": ", 1)[1].split(" \u00b7 "))
    for phase in ("wait", "prepare", "fork", "import", "make_jaxpr", "build", "to server", "decode", "store"):
        assert float(spans[phase]) >= 0, (phase, line)
    total = float(line.split(" in ", 1)[1].split(" s:", 1)[0])
    assert abs(sum(float(v) for v in spans.values()) - total) < 0.05 * total + 0.01, line  # every moment counted once


async def test_a_static_call_site_target_has_shapes_on_hover_after_open(live: JaxClient) -> None:
    client = live
    client.open("sites.py")
    await settled(client, "scale")
    assert "f32[3,5]" in await hover(client, "sites.py", line_of(client, "sites.py", "z = x * y"))


async def test_a_save_that_changes_a_width_updates_hover_and_inlay_hints(live: JaxClient) -> None:
    client = live
    client.open("model.py")
    first = await settled(client, "layer")
    text = (client.workspace / "model.py").read_text()
    save(client, "model.py", text.replace("WIDTH = 16", "WIDTH = 32"))
    await settled(client, "layer", after=first["traceId"])
    shown = await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))
    assert "f32[4,32]" in shown and "stale" not in shown
    assert ": f32[4,32]" in await hints(client, "model.py")
    lens = next(lens for lens in await client.lenses(client.uri("model.py")) if lens.data["name"] == "layer")
    resolved = await client.within(client.code_lens_resolve_async(lens))
    assert resolved.command is not None and "f32[4,32]" in resolved.command.title


async def test_a_save_of_a_module_the_target_imports_re_traces_it(live: JaxClient) -> None:
    # widths.py gives no frame (constants only): it counts because the trace imported it
    client = live
    client.open("configured.py")
    first = await settled(client, "project")
    at = line_of(client, "configured.py", "h = x @ w")
    assert "f32[4,16]" in await hover(client, "configured.py", at)
    client.open("widths.py")
    save(client, "widths.py", (client.workspace / "widths.py").read_text().replace("HIDDEN = 16", "HIDDEN = 24"))
    await settled(client, "project", after=first["traceId"])
    shown = await hover(client, "configured.py", at)
    assert "f32[4,24]" in shown and "stale" not in shown


async def test_a_save_of_a_data_file_the_target_read_re_traces_it(live: JaxClient) -> None:
    client = live
    uri = client.open("datafed.py")
    # HIDDEN is read by a call at the top level, which a live trace runs only once the user's
    # own trace has imported the file whole (docs/live-shapes.md)
    why = await settled(client, "feed", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive" and "top level" in why["reason"], why
    params = {"textDocument": {"uri": uri}, "name": "feed"}
    first = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT)
    at = line_of(client, "datafed.py", "h = x @ w")
    assert "f32[4,16]" in await hover(client, "datafed.py", at)
    client.open("datafed.json")
    save(client, "datafed.json", '{"hidden": 24}\n')
    await settled(client, "feed", after=first["traceId"])
    assert "f32[4,24]" in await hover(client, "datafed.py", at)


async def test_a_save_that_changes_only_comments_and_layout_moves_the_graph_without_a_capture(
    live: JaxClient,
) -> None:
    client = live
    client.open("model.py")
    first = await settled(client, "layer")
    ran = imports(client, "model")
    text = (client.workspace / "model.py").read_text()
    edited = text.replace("    h = x @ w\n", "    # project to WIDTH\n\n    h = (\n        x @ w\n    )\n")
    save(client, "model.py", edited)
    moved = await settled(client, "layer", after=first["traceId"])
    assert imports(client, "model") == ran  # no capture ran: the program is the same
    at = line_of(client, "model.py", "x @ w")
    assert at > line_of(client, "model.py", "h = (")
    shown = await hover(client, "model.py", at)
    assert "f32[4,16]" in shown and "stale" not in shown
    above = await hover(client, "model.py", at - 3)  # the comment, where the line was: only the old trace has it
    assert "f32[4,16]" not in above or "stale" in above
    assert any(m.message.startswith("live layer fresh in ") and " moved " in m.message for m in client.log_messages)
    save(client, "model.py", edited.replace("WIDTH = 16", "WIDTH = 32"))  # a change: a capture
    await settled(client, "layer", after=moved["traceId"])
    assert imports(client, "model") == ran + 1
    assert "f32[4,32]" in await hover(client, "model.py", at)


async def test_a_broken_shape_is_a_diagnostic_at_its_line_until_a_save_fixes_it(live: JaxClient) -> None:
    client = live
    uri = client.open("model.py")
    first = await settled(client, "layer")
    good = (client.workspace / "model.py").read_text()
    at = line_of(client, "model.py", "h = x @ w")
    save(client, "model.py", good.replace("x.shape[-1], WIDTH", "x.shape[-1] + 1, WIDTH"))
    await settled(client, "layer", ("failed",))
    await client.wait_until(lambda: bool(client.diagnostics.get(uri)), TRACE_WAIT)
    (diagnostic,) = [d for d in client.diagnostics[uri] if d.source == "jaxlsp"]
    assert diagnostic.range.start.line == at and diagnostic.severity == types.DiagnosticSeverity.Error
    assert "dot_general" in diagnostic.message or "shape" in diagnostic.message

    save(client, "model.py", good)
    await settled(client, "layer", after=first["traceId"])
    await client.wait_until(lambda: not client.diagnostics.get(uri), TRACE_WAIT)


async def test_a_save_traces_the_target_it_edited_before_the_others_in_its_file(one_slot: JaxClient) -> None:
    client = one_slot
    client.open("pair.py")
    await settled(client, "first")
    await settled(client, "second")
    text = (client.workspace / "pair.py").read_text()
    seen = len(client.live)  # type: ignore[attr-defined]
    save(client, "pair.py", text.replace("return y + 1.0", "return y + 2.0"))

    await client.wait_until(lambda: first_traced(client, seen) is not None, TRACE_WAIT)
    assert first_traced(client, seen) == "second"  # the edited one; ``first`` is defined above it
    await settled(client, "first", ("fresh",))


async def test_a_save_that_edits_no_target_traces_the_one_traced_before_ahead_of_its_neighbours(
    one_slot: JaxClient,
) -> None:
    client = one_slot
    client.open("neighbours.py")
    first = await settled(client, "traced")
    for name in ("scaled", "shifted"):  # no profile, no call site: not live
        await settled(client, name, ("notLive",))
    text = (client.workspace / "neighbours.py").read_text()
    seen = len(client.live)  # type: ignore[attr-defined]
    save(client, "neighbours.py", text + "\nEXTRA = 1\n")  # a line outside every target

    await client.wait_until(lambda: first_traced(client, seen) is not None, TRACE_WAIT)
    assert first_traced(client, seen) == "traced"  # defined last, but the only one with a graph
    await settled(client, "traced", after=first["traceId"])


async def test_two_slots_trace_two_targets_side_by_side(two_slots: JaxClient) -> None:
    # Opening a file with several live targets (or many files) traces them side by side, as many
    # at once as there are slots (issue 56: one at a time, a 300-target library took 5 minutes).
    client = two_slots
    client.open("pair.py")
    await settled(client, "first")
    await settled(client, "second")
    both = [
        s
        for s in client.live  # type: ignore[attr-defined]
        if {t["name"] for t in s["targets"] if t["state"] == "tracing"} == {"first", "second"}
    ]
    assert both, "the two targets never traced at once"


async def test_a_burst_of_ten_saves_runs_at_most_two_traces(live: JaxClient) -> None:
    client = live
    client.open("model.py")
    first = await settled(client, "layer")
    before, imported = started(client), imports(client, "model")
    text = (client.workspace / "model.py").read_text()
    for width in range(17, 27):  # ten saves within two seconds
        save(client, "model.py", text.replace("WIDTH = 16", f"WIDTH = {width}"))
        await asyncio.sleep(0.2)  # the user's pace between saves, not a wait for the server
    await settled(client, "layer", after=first["traceId"])
    await client.wait_until(lambda: state(client, "layer")["state"] == "fresh" and started(client) > before)
    assert "f32[4,26]" in await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))
    assert 1 <= started(client) - before <= 2
    assert imports(client, "model") - imported <= 2


async def test_an_untrusted_workspace_runs_nothing_until_trusted(untrusted: JaxClient) -> None:
    client = untrusted
    client.open("model.py")
    text = (client.workspace / "model.py").read_text()
    save(client, "model.py", text.replace("WIDTH = 16", "WIDTH = 20"))
    shown = await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))  # answered after both
    assert shown.startswith("**jaxlsp** · no shape here: `layer` has not been traced")  # nothing ran
    assert not (client.workspace / "IMPORTS").exists() and client.trust_prompts == []
    assert not [s for s in client.live if s["targets"]]  # type: ignore[attr-defined]

    client.trust_answer = "Trust once"  # the user's own trace, and their answer, trust it
    params = {"textDocument": {"uri": client.uri("model.py")}, "name": "layer"}
    first = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT)
    save(client, "model.py", text.replace("WIDTH = 16", "WIDTH = 24"))
    await settled(client, "layer", after=first["traceId"])
    assert "f32[4,24]" in await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))


async def test_live_shapes_off_runs_nothing(off: JaxClient) -> None:
    client = off
    client.open("model.py")
    text = (client.workspace / "model.py").read_text()
    save(client, "model.py", text.replace("WIDTH = 16", "WIDTH = 20"))
    shown = await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))
    assert shown.startswith("**jaxlsp** · no shape here: `layer` has not been traced")
    assert not (client.workspace / "IMPORTS").exists()
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"jaxlsp": {"liveShapes": True}})
    )
    await settled(client, "layer")  # turned on: what is open goes live
    assert "f32[4,20]" in await hover(client, "model.py", line_of(client, "model.py", "h = x @ w"))


async def test_a_target_that_only_a_test_can_feed_is_not_live_until_picked(live: JaxClient) -> None:
    client = live
    uri = client.open("tested.py")
    why = await settled(client, "shift", ("notLive",))
    assert "example" in why["reason"] and imports(client, "tested") == 0  # the test never ran
    lens = next(lens for lens in await client.lenses(uri) if lens.data["name"] == "shift")
    resolved = await client.within(client.code_lens_resolve_async(lens))
    assert resolved.command is not None and "not live" in resolved.command.title

    params = {"textDocument": {"uri": uri}, "name": "shift", "example": "tests/test_tested.py::test_shift"}
    picked = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), 300)
    assert picked["summary"]["outputs"] == ["f32[2,7]"]
    text = (client.workspace / "tested.py").read_text()
    save(client, "tested.py", text.replace("x + 1.0", "x + 2.0"))
    await settled(client, "shift", after=picked["traceId"])  # the pick is what it runs now
    assert "f32[2,7]" in await hover(client, "tested.py", line_of(client, "tested.py", "y = x + 2.0"))


async def test_broken_jaxtyping_annotations_are_one_shape_contract_warning_each(live: JaxClient) -> None:
    client = live
    uri = client.open("contracts.py")
    done = await settled(client, "pipeline")  # the trace still made its graph
    page = await client.request("jaxlsp/graph", {"traceId": done["traceId"]})
    assert page["items"]
    warnings = [d for d in client.diagnostics.get(uri, []) if d.code == "shape-contract"]
    by_line = {d.range.start.line: d for d in warnings}
    assert len(warnings) == 3 and all(d.severity == types.DiagnosticSeverity.Warning for d in warnings)
    wrong_dim = by_line[line_of(client, "contracts.py", "def wrong_dim")]
    assert wrong_dim.message.startswith('x: expected Float[Array, "batch 128"], got f32[8,64] (batch=8 from x at')
    mismatch = by_line[line_of(client, "contracts.py", "def mismatch")]
    assert (
        mismatch.message.startswith('b: expected Float[Array, "batch n"], got f32[8,1]') and "n=64" in mismatch.message
    )
    returned = by_line[line_of(client, "contracts.py", "def wrong_return")]
    assert returned.message.startswith('return: expected Float[Array, "batch d"], got f32[8,3]')
    text = (client.workspace / "contracts.py").read_text().splitlines()
    start, end = wrong_dim.range.start, wrong_dim.range.end  # on the annotation itself
    assert text[start.line][start.character : end.character] == 'Float[Array, "batch 128"]'


async def test_kept_jaxtyping_annotations_are_checked_and_give_no_warning(live: JaxClient) -> None:
    client = live
    uri = client.open("contracts_ok.py")
    done = await settled(client, "clean")
    assert not [d for d in client.diagnostics.get(uri, []) if d.code == "shape-contract"]
    exported = await client.request("jaxlsp/export", {"traceId": done["traceId"], "format": "json"})
    graph = json.loads(Path(unquote(exported["uri"].removeprefix("file://"))).read_text())
    assert graph["contracts"]["checked"] == ["contracts_ok.clean", "contracts_ok.dense"]
    assert graph["contracts"]["violations"] == []


async def test_hover_names_the_dimensions_the_annotations_bound(live: JaxClient) -> None:
    client = live
    client.open("contracts_ok.py")
    await settled(client, "clean")
    shown = await hover(client, "contracts_ok.py", line_of(client, "contracts_ok.py", "return x @ w"))
    assert "`f32[8,32]  batch \u00d7 32`" in shown and "`f32[8,16]  batch \u00d7 16`" in shown


async def test_a_target_with_two_profiles_is_not_live_until_one_is_picked(live: JaxClient) -> None:
    client = live
    uri = client.open("twice.py")
    why = await settled(client, "double", ("notLive",))
    assert "several profiles target double" in why["reason"]
    assert not [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp"]  # not an error of the user's
    params = {"textDocument": {"uri": uri}, "name": "double", "profile": "double_big"}
    picked = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT)
    text = (client.workspace / "twice.py").read_text()
    save(client, "twice.py", text.replace("[x, x]", "[x, x, x]"))
    await settled(client, "double", after=picked["traceId"])
    assert "f32[192]" in await hover(client, "twice.py", line_of(client, "twice.py", "return jnp.concatenate"))


async def test_a_factory_returning_a_module_is_not_live_and_no_error(live: JaxClient) -> None:
    client = live
    uri = client.open("factory.py")
    why = await settled(client, "make_head", ("notLive", "failed"))
    assert why["state"] == "notLive", why
    assert "returned a factory.Head" in why["reason"] and "init.factory" in why["reason"], why
    assert not [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp"]  # nothing the user broke


async def test_a_save_traces_the_target_last_hovered_before_its_neighbours(one_slot: JaxClient) -> None:
    # An edit inside no target (a new line at the end of the file): the one the user was looking
    # at goes first, not the first one defined.
    client = one_slot
    client.open("pair.py")
    await settled(client, "first")
    await settled(client, "second")
    assert "f32" in await hover(client, "pair.py", line_of(client, "pair.py", "y = jnp.cos(x)"))
    text = (client.workspace / "pair.py").read_text()
    seen = len(client.live)  # type: ignore[attr-defined]
    save(client, "pair.py", text + "\nLATER = 1\n")

    await client.wait_until(lambda: first_traced(client, seen) is not None, TRACE_WAIT)
    assert first_traced(client, seen) == "second"  # hovered; ``first`` is defined above it
    await settled(client, "first", ("fresh",))
