"""Protocol-level behaviour: capabilities, errors, progress, watcher registration, the raw stdio
stream, and that a whole session never imports JAX."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

import jaxlsp
from tests.deadlines import scaled
from tests.server.expected import MIXED_LENSES

if TYPE_CHECKING:
    from conftest import JaxClient, StderrClient

REQUEST_FAILED = -32803
INVALID_PARAMS = -32602
NOT_TRUSTED = "is not trusted"
COMMANDS = [  # sorted, as advertised: derived from the registered commands
    "jaxlsp.checkEnvironment",
    "jaxlsp.learnShapes",
    "jaxlsp.listTrusted",
    "jaxlsp.openGraph",
    "jaxlsp.revokeTrust",
    "jaxlsp.traceCompiled",
    "jaxlsp.traceGraph",
    "jaxlsp.traceWithValues",
]


# -- initialize --------------------------------------------------------------------------------
async def test_server_capabilities(client: JaxClient) -> None:
    result = client.initialize_result
    assert result is not None
    assert result.server_info is not None
    assert result.server_info.name == "jaxlsp"
    assert result.server_info.version == jaxlsp.__version__
    caps = result.capabilities
    assert client.plain(caps.experimental) == {
        "jaxlsp": {
            "version": 1,
            "discover": True,
            "traceGraph": True,
            "environment": True,
            "openGraph": True,
            "costs": True,
            "diff": True,
            "values": True,
            "commands": COMMANDS,
        }
    }
    assert caps.code_lens_provider is not None
    assert caps.code_lens_provider.resolve_provider is True
    assert caps.code_action_provider
    assert caps.execute_command_provider is not None
    assert sorted(caps.execute_command_provider.commands) == sorted(COMMANDS)


# -- jaxlsp.traceGraph and jaxlsp/trace ----------------------------------------------------------
async def _execute(client: JaxClient, arguments: list[Any]) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await client.within(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="jaxlsp.traceGraph", arguments=arguments)
            )
        )
    return info.value


async def test_trace_graph_in_an_untrusted_workspace_runs_nothing(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    for argument in ({"uri": uri, "name": "Dense"}, {"uri": uri, "name": "scale", "profile": "default"}):
        error = await _execute(client, [argument])
        assert error.code == REQUEST_FAILED
        assert NOT_TRUSTED in error.message


async def test_trace_graph_command_bad_arguments(client: JaxClient) -> None:
    uri = client.uri("mixed.py")
    cases: dict[str, list[Any]] = {
        "no argument": [],
        "two arguments": [{"uri": uri, "name": "Dense"}, {"uri": uri, "name": "scale"}],
        "missing name": [{"uri": uri}],
        "empty name": [{"uri": uri, "name": ""}],
        "missing uri": [{"name": "Dense"}],
        "not an object": ["Dense"],
    }
    codes = {case: (await _execute(client, arguments)).code for case, arguments in cases.items()}
    assert codes == dict.fromkeys(cases, INVALID_PARAMS)


async def _request_error(client: JaxClient, method: str, params: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await client.request(method, params)
    return info.value


async def test_trace_request(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    error = await _request_error(client, "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "Dense"})
    assert error.code == REQUEST_FAILED
    assert NOT_TRUSTED in error.message

    cases: dict[str, Any] = {
        "missing name": {"textDocument": {"uri": uri}},
        "missing textDocument": {"name": "Dense"},
        "uri not a string": {"textDocument": {"uri": 1}, "name": "Dense"},
    }
    codes = {case: (await _request_error(client, "jaxlsp/trace", params)).code for case, params in cases.items()}
    assert codes == dict.fromkeys(cases, INVALID_PARAMS)


# -- jaxlsp/discover ---------------------------------------------------------------------------
async def test_discover_bad_params(client: JaxClient) -> None:
    cases: dict[str, Any] = {
        "no params": None,
        "empty params": {},
        "missing textDocument": {"uri": client.uri("mixed.py")},
        "textDocument not an object": {"textDocument": client.uri("mixed.py")},
        "missing uri": {"textDocument": {}},
        "uri not a string": {"textDocument": {"uri": 42}},
        "empty uri": {"textDocument": {"uri": ""}},
        "untitled uri": {"textDocument": {"uri": "untitled:Untitled-1"}},
        "https uri": {"textDocument": {"uri": "https://example.com/model.py"}},
    }
    errors = {case: await _request_error(client, "jaxlsp/discover", params) for case, params in cases.items()}
    assert {case: e.code for case, e in errors.items()} == dict.fromkeys(cases, INVALID_PARAMS)
    assert "file:" in errors["untitled uri"].message

    # The same connection still answers a good request afterwards.
    result = await client.request("jaxlsp/discover", {"textDocument": {"uri": client.uri("mixed.py")}})
    assert [(e["name"], e["range"]["start"]["line"]) for e in result["entrypoints"]] == MIXED_LENSES
    # A file: URI of a file that does not exist is not an error: it holds nothing.
    result = await client.request("jaxlsp/discover", {"textDocument": {"uri": client.uri("nowhere.py")}})
    assert result == {"entrypoints": [], "drivers": []}


# -- initialized: progress, watcher registration, refresh ----------------------------------------
async def test_indexing_reports_work_done_progress(client: JaxClient) -> None:
    """Both capability sets advertise window.workDoneProgress; the client records from before initialize."""
    await client.wait_indexed()
    assert len(client.progress_reports) == 1, "one indexing progress"
    ((token, reports),) = client.progress_reports.items()
    assert client.progress_kinds[token][0] == "begin" and client.progress_kinds[token][-1] == "end"
    begin, end = reports[0], reports[-1]
    assert isinstance(begin, types.WorkDoneProgressBegin)
    assert begin.title == "jaxlsp: indexing"
    assert isinstance(end, types.WorkDoneProgressEnd)
    # mixed.py, sub.py, pkg/__init__.py and pkg/base.py
    assert end.message == "4 files indexed"
    if client.refresh_support:
        await client.wait_for_refreshes(1)  # VS Code re-requests lenses once the index is complete


async def test_watched_files_registration_follows_capabilities(client: JaxClient) -> None:
    caps = client.capabilities
    assert caps is not None and caps.workspace is not None
    dynamic = bool(
        caps.workspace.did_change_watched_files and caps.workspace.did_change_watched_files.dynamic_registration
    )
    assert dynamic == (client.client_name == "visual-studio-code")
    if dynamic:
        await client.wait_until(lambda: bool(client.registrations))
        (registration,) = client.registrations
        assert registration.method == "workspace/didChangeWatchedFiles"
        options = client.plain(registration.register_options)
        assert [w["globPattern"] for w in options["watchers"]] == ["**/*.py", "**/*.ipynb"]
    else:
        await client.wait_indexed()  # registration would be sent before indexing starts
        await client.lenses(client.open("mixed.py"))  # and a round trip flushes anything pending
        assert client.registrations == []


async def test_no_lens_refresh_without_refresh_support(client: JaxClient) -> None:
    await client.wait_indexed()
    uri = client.open("pkg/base.py")
    client.edit(uri, (3, 11), (3, 20), "object")
    await client.lenses(client.open("sub.py"))  # a round trip after the change
    if client.refresh_support:
        await client.wait_for_refreshes(2)  # after indexing, and after the base class change
    else:
        assert client.refreshes == 0


# -- the raw stdio stream -------------------------------------------------------------------------
def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def parse_frames(data: bytes) -> list[dict[str, Any]]:
    """Split ``data`` into ``Content-Length`` framed JSON messages; fail on any other byte."""
    messages: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\r\n\r\n", pos)
        assert end != -1, f"bytes after the last message: {data[pos : pos + 200]!r}"
        headers: dict[bytes, bytes] = {}
        for line in data[pos:end].split(b"\r\n"):
            name, colon, value = line.partition(b":")
            assert colon, f"not a header line at byte {pos}: {line[:200]!r}"
            headers[name.strip().lower()] = value.strip()
        assert set(headers) <= {b"content-length", b"content-type"}, headers
        length = int(headers[b"content-length"])
        body = data[end + 4 : end + 4 + length]
        assert len(body) == length, f"truncated message at byte {pos}"
        message = json.loads(body)
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
        messages.append(message)
        pos = end + 4 + length
    return messages


def test_frame_parser_rejects_stray_output() -> None:
    good = frame({"jsonrpc": "2.0", "id": 1, "result": None})
    assert parse_frames(good + good) == [{"jsonrpc": "2.0", "id": 1, "result": None}] * 2
    for bad in (b"hello\n" + good, good + b"hello\n", good[:-1], good + b"Content-Length: 5\r\n\r\n{}"):
        with pytest.raises((AssertionError, ValueError)):
            parse_frames(bad)


def test_raw_stdio_carries_only_framed_messages(workspace: Path) -> None:
    uri = (workspace / "mixed.py").as_uri()
    text = (workspace / "mixed.py").read_text(encoding="utf-8")
    script = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}},
        },
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeLens", "params": {"textDocument": {"uri": uri}}},
        # A cancel for a request already answered (VS Code sends them routinely): no noise on stderr.
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 99}},
        # A refusal is the client's answer, not the server's fault: no traceback on stderr.
        {"jsonrpc": "2.0", "id": 4, "method": "jaxlsp/diff", "params": {"traceId": "t-nowhere"}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxlsp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workspace,
    )
    try:
        stdout, stderr = proc.communicate(b"".join(frame(m) for m in script), timeout=scaled(20))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    messages = parse_frames(stdout)
    responses = {m["id"]: m for m in messages if "id" in m and "method" not in m}
    assert sorted(responses) == [1, 2, 3, 4], messages
    refused = responses.pop(4)
    assert "t-nowhere" in refused["error"]["message"], refused
    assert all("error" not in m for m in responses.values()), responses
    assert responses[1]["result"]["serverInfo"]["name"] == "jaxlsp"
    lenses = responses[2]["result"]
    assert [(lens["data"]["name"], lens["range"]["start"]["line"]) for lens in lenses] == MIXED_LENSES
    assert responses[3]["result"] is None
    # A client with no capabilities gets no server requests (progress, registration, refresh).
    assert [m["method"] for m in messages if "method" in m and "id" in m] == []
    assert proc.returncode == 0, stderr.decode("utf-8", "replace")[-2000:]
    assert b"Cancel notification" not in stderr, stderr.decode("utf-8", "replace")[-2000:]
    assert b"Traceback" not in stderr and b"t-nowhere" not in stderr, stderr.decode("utf-8", "replace")[-2000:]


# -- never import JAX ---------------------------------------------------------------------------
BANNED = frozenset({"jax", "jaxlib", "flax", "equinox"})


def imported_modules(stderr_lines: list[str]) -> list[str]:
    """Module names from ``-X importtime`` lines: ``import time:  123 |  456 |   a.b``."""
    modules = []
    for line in stderr_lines:
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            if name != "imported package":
                modules.append(name)
    return modules


def banned_modules(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in BANNED]


def test_importtime_parsing() -> None:
    lines = [
        "import time: self [us] | cumulative | imported package",
        "import time:       123 |        456 |     jax.numpy",
        "import time:        12 |         12 | jaxlsp.server",
        "import time:        12 |         12 |   flax",
        "jaxlsp WARNING x: import time: not an import line | jax",
    ]
    assert imported_modules(lines) == ["jax.numpy", "jaxlsp.server", "flax"]
    assert banned_modules(imported_modules(lines)) == ["jax.numpy", "flax"]


async def test_a_session_never_imports_jax(importtime_client: StderrClient) -> None:
    client = importtime_client
    await client.wait_indexed()
    mixed = client.open("mixed.py")
    lenses = await client.lenses(mixed)
    assert [(lens.data["name"], lens.range.start.line) for lens in lenses] == MIXED_LENSES
    for lens in lenses:
        await client.within(client.code_lens_resolve_async(lens))
    assert [a.title for a in await client.actions(mixed, 18, 8)] == [
        "Trace graph: Dense",
        "Trace with values: Dense",
        "Trace compiled: Dense",
    ]
    await client.request("jaxlsp/discover", {"textDocument": {"uri": mixed}})
    error = await _execute(client, [{"uri": mixed, "name": "Dense"}])
    assert error.code == REQUEST_FAILED
    sub = client.open("sub.py")
    assert await client.lens_names(sub) == [("ViaPackage", 4), ("ViaModule", 8)]
    base = client.open("pkg/base.py")
    client.edit(base, (3, 11), (3, 20), "object")
    assert await client.lens_names(sub) == []

    await client.finish()
    modules = imported_modules(await client.stderr_closed())
    # The report is really there: the server's own modules were imported under -X importtime.
    assert {"jaxlsp.server.app", "jaxlsp.discovery.classify", "pygls.lsp.server"} <= set(modules)
    assert banned_modules(modules) == []
