"""Protocol abuse against the real server over stdio (raw JSON-RPC frames, see ``helpers.Peer``).

Every custom method and command gets missing, wrong-typed, 10 MB and random (hypothesis) params;
unknown trace and node ids; cancels of finished and unknown requests; out-of-order document
versions; requests after ``shutdown``. Every request gets a result or a JSON-RPC error (never an
internal error: bad input is the client's, and the error says what and where), and the server
keeps answering. The workspace is untrusted and carries a sentinel interpreter: no abuse makes the
server run anything.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, RpcError, record, server_env, untrusted_workspace

INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR, REQUEST_FAILED = -32600, -32602, -32603, -32803
METHODS = [
    "jaxlsp/discover",
    "jaxlsp/trace",
    "jaxlsp/graph",
    "jaxlsp/node",
    "jaxlsp/nodesAt",
    "jaxlsp/export",
    "jaxlsp/revealSource",
    "jaxlsp/openGraph",
    "jaxlsp/environment",
]
COMMANDS = ["jaxlsp.traceGraph", "jaxlsp.listTrusted", "jaxlsp.revokeTrust", "jaxlsp.checkEnvironment"]
HUGE = "x" * (10 * 1024 * 1024)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Peer, Path, Path]]:
    root, sentinel = untrusted_workspace(tmp_path_factory.mktemp("abuse"))
    peer = Peer(env=server_env())
    peer.initialize(root)
    peer.open(root / "model.py")
    yield peer, root, sentinel
    peer.close()


def answered(peer: Peer, method: str, params: Any, *, with_params: bool = True) -> dict[str, Any]:
    """Send one request; it must get a result or a well-formed, non-internal JSON-RPC error."""
    reply = peer.wait(peer.start(method, params, with_params=with_params))
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        error = reply["error"]
        assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str), error
        assert error["code"] != INTERNAL_ERROR, f"{method} {str(params)[:200]}: internal error {error}"
        assert error["message"].strip(), error
    return reply


def command(name: str, arguments: Any) -> dict[str, Any]:
    return {"command": name, "arguments": arguments}


BAD_PARAMS: list[Any] = [
    None,
    [],
    "text",
    17,
    True,
    {},
    {"textDocument": 1},
    {"textDocument": {"uri": 5}},
    {"textDocument": {"uri": "http://example.com/x.py"}},
    {"textDocument": {"uri": "file:///no/such/file.py"}, "name": 3},
    {"textDocument": {"uri": "file:///no/such/file.py"}, "position": {"line": -1, "character": "a"}},
    {"traceId": 5},
    {"traceId": "t-unknown"},
    {"traceId": "t-unknown", "nodeId": "n-unknown"},
    {"traceId": "t-unknown", "group": 4, "cursor": [], "limit": 10**12},
    {"traceId": "t-unknown", "format": "exe"},
    {"uri": "file:///etc/passwd", "name": "x", "answers": [1], "save": "yes"},
]


@pytest.mark.parametrize("method", METHODS)
def test_methods_with_missing_and_wrong_params(served: tuple[Peer, Path, Path], method: str) -> None:
    peer, _root, sentinel = served
    replies = [answered(peer, method, None, with_params=False)]
    replies += [answered(peer, method, params) for params in BAD_PARAMS]
    assert all("error" in r for r in replies[1:6]), "a non-object params was accepted"
    assert peer.alive()
    assert not sentinel.exists(), sentinel.read_text()


@pytest.mark.parametrize("name", COMMANDS)
def test_commands_with_missing_and_wrong_arguments(served: tuple[Peer, Path, Path], name: str) -> None:
    peer, _root, sentinel = served
    for arguments in ([], [None], [1, 2], ["text"], [{}], [{"uri": 3}], *[[p] for p in BAD_PARAMS]):
        answered(peer, "workspace/executeCommand", command(name, arguments))
    answered(peer, "workspace/executeCommand", {"command": name})
    assert peer.alive()
    assert not sentinel.exists(), sentinel.read_text()


def test_unknown_trace_and_node_ids_name_them(served: tuple[Peer, Path, Path]) -> None:
    peer, _, _ = served
    for method, params in [
        ("jaxlsp/graph", {"traceId": "t-missing"}),
        ("jaxlsp/node", {"traceId": "t-missing", "nodeId": "n-missing"}),
        ("jaxlsp/export", {"traceId": "t-missing", "format": "json"}),
        ("jaxlsp/revealSource", {"traceId": "t-missing", "nodeId": "n-missing"}),
        ("jaxlsp/openGraph", {"traceId": "t-missing"}),
    ]:
        with pytest.raises(RpcError) as info:
            peer.call(method, params)
        assert info.value.code in (REQUEST_FAILED, INVALID_PARAMS), info.value
        assert "t-missing" in info.value.message, (method, info.value.message)


def test_ten_megabyte_params(served: tuple[Peer, Path, Path]) -> None:
    peer, root, sentinel = served
    uri = (root / "model.py").as_uri()
    for method, params in [
        ("jaxlsp/discover", {"textDocument": {"uri": "file:///" + HUGE}}),
        ("jaxlsp/graph", {"traceId": HUGE}),
        ("jaxlsp/node", {"traceId": "t", "nodeId": HUGE}),
        ("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": HUGE}),
        ("jaxlsp/nodesAt", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}, "pad": HUGE}),
        ("workspace/executeCommand", command("jaxlsp.revokeTrust", [HUGE])),
    ]:
        reply = answered(peer, method, params)
        if "error" in reply:
            assert len(reply["error"]["message"]) < 64 * 1024, "the error echoes 10 MB back"
    peer.notify(
        "textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": HUGE}]}
    )
    assert peer.alive()
    peer.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": (root / "model.py").read_text()}]},
    )
    assert [e["name"] for e in peer.call("jaxlsp/discover", {"textDocument": {"uri": uri}})["entrypoints"]] == [
        "predict",
        "MLP",
    ]
    assert not sentinel.exists()


def test_cancels_of_finished_and_unknown_requests(served: tuple[Peer, Path, Path]) -> None:
    peer, root, _ = served
    done = peer.start("jaxlsp/discover", {"textDocument": {"uri": (root / "model.py").as_uri()}})
    assert "result" in peer.wait(done)
    for ident in (done, 10**9, "no-such-request", None, {"x": 1}):
        peer.notify("$/cancelRequest", {"id": ident})
    peer.notify("$/cancelRequest", None)
    assert peer.alive()


def test_out_of_order_document_versions(served: tuple[Peer, Path, Path]) -> None:
    peer, root, _ = served
    path = root / "model.py"
    uri = path.as_uri()
    text = path.read_text()
    peer.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    peer.open(path, text, version=5)
    for version in (3, 9, 4, 4, -1):  # stale, ahead, stale, repeated, negative: the latest text wins
        peer.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"text": text + f"\n# v{version}\n"}],
            },
        )
    # an incremental change whose range lies outside the document
    peer.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": 10},
            "contentChanges": [
                {"range": {"start": {"line": 999, "character": 0}, "end": {"line": 1999, "character": 5}}, "text": "x"}
            ],
        },
    )
    peer.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": "file:///never/opened.py", "version": 1}, "contentChanges": [{"text": "x"}]},
    )
    peer.notify("textDocument/didClose", {"textDocument": {"uri": "file:///never/opened.py"}})
    assert peer.alive()
    lenses = peer.call("textDocument/codeLens", {"textDocument": {"uri": uri}})
    assert isinstance(lenses, list)
    peer.notify(
        "textDocument/didChange", {"textDocument": {"uri": uri, "version": 11}, "contentChanges": [{"text": text}]}
    )
    names = [e["name"] for e in peer.call("jaxlsp/discover", {"textDocument": {"uri": uri}})["entrypoints"]]
    assert names == ["predict", "MLP"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(
    [
        "textDocument",
        "uri",
        "name",
        "traceId",
        "nodeId",
        "group",
        "cursor",
        "limit",
        "format",
        "position",
        "profile",
        "answers",
        "save",
        "frame",
        "refresh",
    ]
)
params_strategy = st.one_of(json_values, st.dictionaries(keys, json_values, max_size=5))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], database=None)
@given(method=st.sampled_from(METHODS + [f"cmd:{c}" for c in COMMANDS]), params=params_strategy)
def test_random_params(served: tuple[Peer, Path, Path], method: str, params: Any) -> None:
    peer, _, sentinel = served
    if method.startswith("cmd:"):
        args = params if isinstance(params, list) else [params]
        answered(peer, "workspace/executeCommand", command(method[4:], args))
    else:
        answered(peer, method, params)
    assert peer.proc.poll() is None
    assert not sentinel.exists()


def test_optional_members_sent_as_null_are_absent(served: tuple[Peer, Path, Path]) -> None:
    """Found by ``test_random_params``: ``{"textDocument": null}`` passed the params check (an
    optional member sent as null reads as absent) but the handler asked ``"textDocument" in
    data`` and indexed ``None``: an internal error. The parsed params now leave such members out."""
    peer, _, _ = served
    for method, params in [
        ("jaxlsp/environment", {"textDocument": None}),
        ("jaxlsp/diff", {"traceId": None}),
        ("jaxlsp/diff", {"traceId": "t", "limit": None, "base": None}),
    ]:
        answered(peer, method, params)


def test_requests_after_shutdown_get_an_error(tmp_path: Path) -> None:
    root, _ = untrusted_workspace(tmp_path)
    peer = Peer(env=server_env())
    try:
        peer.initialize(root)
        assert peer.call("shutdown", None, with_params=False) is None
        refused = []
        for method, params in [
            ("jaxlsp/discover", {"textDocument": {"uri": (root / "model.py").as_uri()}}),
            ("textDocument/codeLens", {"textDocument": {"uri": (root / "model.py").as_uri()}}),
            ("workspace/executeCommand", command("jaxlsp.listTrusted", [])),
            ("shutdown", None),
        ]:
            with pytest.raises(RpcError) as info:
                peer.call(method, params, timeout=scaled(10))
            refused.append(info.value.code)
        assert set(refused) == {INVALID_REQUEST}, refused
        peer.send({"jsonrpc": "2.0", "method": "exit"})
        assert peer.proc.wait(timeout=scaled(15)) == 0
        record(**{"protocol.after_shutdown": "InvalidRequest for every request; exit code 0"})
    finally:
        peer.close()


# -- issue 20: echoes, internal errors, framing -------------------------------------------------

ECHO_LIMIT = 2000  # characters of an error message at most; the value itself is quoted by a prefix


def test_ten_megabyte_values_never_come_back(served: tuple[Peer, Path, Path]) -> None:
    """A 10 MB profile, group, answers key, command name or device is named by a short prefix."""
    peer, root, sentinel = served
    uri = (root / "model.py").as_uri()
    for method, params in [
        ("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict", "profile": HUGE}),
        ("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict", "answers": {HUGE: 1}}),
        ("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict", "answers": {"a": HUGE}}),
        ("jaxlsp/graph", {"traceId": "t", "group": HUGE}),
        ("jaxlsp/graph", {"traceId": "t", "cursor": HUGE}),
        ("jaxlsp/environment", {"device": HUGE}),
        ("workspace/executeCommand", {"command": HUGE, "arguments": []}),
        ("workspace/executeCommand", command("jaxlsp.traceGraph", [{"uri": uri, "name": "x", "profile": HUGE}])),
        ("workspace/executeCommand", command("jaxlsp.checkEnvironment", [{"device": HUGE}])),
        (HUGE, {}),
    ]:
        reply = answered(peer, method, params)
        text = json.dumps(reply)
        assert len(text) < ECHO_LIMIT + 500, f"{method[:40]}: {len(text):,} characters came back"
        assert "error" in reply, (method[:40], reply)
    assert peer.alive()
    assert not sentinel.exists()


def test_bad_values_are_invalid_params_not_internal_errors(served: tuple[Peer, Path, Path]) -> None:
    peer, _, _ = served
    for method, params, where in [
        ("jaxlsp/discover", {"textDocument": {"uri": "file:///tmp/a%00b.py"}}, "params.textDocument.uri"),
        ("jaxlsp/environment", {"textDocument": {"uri": "file:///tmp/a%00b.py"}}, "params.textDocument.uri"),
        (
            "jaxlsp/nodesAt",
            {"textDocument": {"uri": "file:///a%00.py"}, "position": {"line": 0, "character": 0}},
            "uri",
        ),
        ("jaxlsp/export", {"traceId": "t", "format": ["json"]}, "params.format"),
        ("jaxlsp/graph", {"traceId": "t", "limit": True}, "params.limit"),
        ("jaxlsp/trace", {"textDocument": {"uri": "file:///x.py"}, "name": "f", "save": "yes"}, "params.save"),
        ("jaxlsp/trace", {"textDocument": {"uri": "file:///x.py"}, "name": "f\x00"}, "params.name"),
    ]:
        with pytest.raises(RpcError) as info:
            peer.call(method, params)
        assert info.value.code == INVALID_PARAMS, (method, info.value)
        assert where in info.value.message, (method, info.value.message)
        assert info.value.data is None or "traceback" not in json.dumps(info.value.data)


def test_a_deeply_nested_recipe_is_a_recipe_error(peer_factory: Any, tmp_path: Path) -> None:
    """tomllib recurses into nested arrays: 500 deep was a RecursionError, even before trust."""
    root, sentinel = untrusted_workspace(tmp_path)
    (root / "jaxlsp.toml").write_text(
        'version = 1\n[profiles.p]\ntarget = "model.py::predict"\nx = ' + "[" * 500 + "]" * 500 + "\n"
    )
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root)
    uri = peer.open(root / "model.py")
    for method, params in [
        ("jaxlsp/environment", {"textDocument": {"uri": uri}, "name": "predict"}),
        ("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict"}),
    ]:
        reply = answered(peer, method, params)
        assert "error" in reply and "RecursionError" not in json.dumps(reply), reply
    assert peer.alive()
    assert not sentinel.exists()


def test_unparseable_and_overdeep_messages_are_answered(served: tuple[Peer, Path, Path]) -> None:
    peer, _, _ = served
    cases = [
        (b'{"jsonrpc": "2.0", "id": 9001, "method": "jaxlsp/graph", "params": {', -32700),
        (b'{"jsonrpc": "2.0", "id": "s-9002", "method": "jaxlsp/graph", "params": {"a": nul}}', -32700),
        (b'{"jsonrpc":"2.0","id":9003,"method":"jaxlsp/graph","params":' + b"[" * 3000 + b"]" * 3000 + b"}", -32600),
        (b'{"jsonrpc":"2.0","id":9004,"method":"jaxlsp/graph","params":' + b"[" * 100 + b"]" * 100 + b"}", -32600),
        (b'{"jsonrpc":"2.0","id":9005,"method":"textDocument/hover","params":{"textDocument":5}}', -32602),
    ]
    for body, code in cases:
        ident = json.loads(re.search(rb'"id": ?("[^"]+"|\d+)', body).group(1))  # type: ignore[union-attr]
        peer.send_raw(body)
        reply = peer.wait(ident)
        assert reply["error"]["code"] == code, (body[:80], reply)
    peer.send_raw(b"[1, 2]")  # not an object: answered with id null, and the server goes on
    assert peer.alive()


def test_an_oversized_message_ends_the_server_with_one_line(peer_factory: Any, tmp_path: Path) -> None:
    root, _ = untrusted_workspace(tmp_path)
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root)
    assert peer.proc.stdin is not None
    peer.proc.stdin.write(b"Content-Length: 999999999999999\r\n\r\n")
    peer.proc.stdin.flush()
    assert peer.proc.wait(timeout=scaled(30)) == 1
    deadline = time.monotonic() + scaled(10)
    while b"64 MiB" not in peer.stderr and time.monotonic() < deadline:
        time.sleep(0.01)  # the reader thread copies stderr on its own schedule
    err = peer.stderr.decode(errors="replace")
    assert "over the 64 MiB limit" in err, err[-2000:]
    assert "Traceback" not in err and "MemoryError" not in err, err[-2000:]
