"""Names a workspace (or a client) can give, against the real server over stdio (issue 25, items 7
and 8): a NUL (``%00``) in ``rootUri`` or a workspace folder's URI (initialize answered an internal
error, then ``jaxlsp/environment`` and every trace did, for the rest of the session), a symlink
loop ``a.py -> b.py -> a.py`` (every request naming it, and the index walk, raised RuntimeError
from ``Path.resolve``), and a folder whose name holds newlines, ANSI escapes and the right-to-left
override (shown raw, it wrote its own sentence into the trust prompt). The bad folder is refused
with a message naming it, a loop is -32602 naming the file or a "not analysed" diagnostic, the
prompt's sentence stays fixed with the name escaped, and the session goes on.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import Deadline
from tests.robustness.helpers import Peer, server_env, untrusted_workspace

INVALID_PARAMS, INTERNAL_ERROR, REQUEST_FAILED = -32602, -32603, -32803
CAPABILITIES = {
    "window": {"workDoneProgress": True, "showDocument": {"support": True}},
    "workspace": {"codeLens": {"refreshSupport": True}, "configuration": True},
    "textDocument": {"codeLens": {}, "hover": {}, "codeAction": {}, "inlayHint": {}},
}
SPOOF = 'x\n\nThis folder is already trusted by your administrator. Choose Always\x1b[2J\u202eok\u200b"'


def requests(uri: str, name: str = "predict") -> list[tuple[str, dict[str, Any]]]:
    """The requests that name a document, the custom ones and the standard ones."""
    everything = {"start": {"line": 0, "character": 0}, "end": {"line": 20, "character": 0}}
    position = {"line": 8, "character": 5}
    return [
        ("jaxlsp/discover", {"textDocument": {"uri": uri}}),
        ("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": name}),
        ("jaxlsp/environment", {"textDocument": {"uri": uri}, "name": name}),
        ("jaxlsp/nodesAt", {"textDocument": {"uri": uri}, "position": position}),
        ("textDocument/codeLens", {"textDocument": {"uri": uri}}),
        ("textDocument/hover", {"textDocument": {"uri": uri}, "position": position}),
        ("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": everything}),
        (
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": everything, "context": {"diagnostics": []}},
        ),
        ("workspace/executeCommand", {"command": "jaxlsp.traceGraph", "arguments": [{"uri": uri, "name": name}]}),
    ]


def answer(peer: Peer, method: str, params: Any) -> dict[str, Any]:
    """A result or a well-formed error that is not an internal one."""
    reply = peer.wait(peer.start(method, params))
    assert ("result" in reply) != ("error" in reply), reply
    if "error" in reply:
        assert reply["error"]["code"] != INTERNAL_ERROR, f"{method}: internal error {reply['error']}"
    return reply


def initialize(peer: Peer, root_uri: str, folders: list[str]) -> Any:
    result = peer.call(
        "initialize",
        {
            "processId": os.getpid(),
            "rootUri": root_uri,
            "workspaceFolders": [{"uri": uri, "name": f"folder{i}"} for i, uri in enumerate(folders)] or None,
            "capabilities": CAPABILITIES,
            "initializationOptions": {"jaxlsp": {}},
        },
    )
    peer.notify("initialized", {})
    return result


def shown_messages(peer: Peer, deadline: float = 10.0) -> list[str]:
    """The window/showMessage texts so far, once at least one came (within ``deadline``)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        said = [m["params"]["message"] for m in list(peer.seen) if m.get("method") == "window/showMessage"]
        if said:
            return said
        time.sleep(0.05)
    return []


@pytest.mark.parametrize(
    ("bad", "named", "why"),
    [
        ("sub%00dir", "sub\\x00dir", "NUL character"),  # was -32603: ValueError: embedded null byte
        ("loop", "/loop", "symlink loop"),  # a folder linked to itself: -32603 RuntimeError
    ],
)
def test_a_bad_workspace_folder_is_refused_and_the_session_goes_on(
    peer_factory: Any, tmp_path: Path, bad: str, named: str, why: str
) -> None:
    root, sentinel = untrusted_workspace(tmp_path)
    os.symlink("loop", root / "loop")
    folder = root.as_uri() + "/" + bad
    peer: Peer = peer_factory(env=server_env())
    initialize(peer, folder, [folder, root.as_uri()])
    said = shown_messages(peer)
    assert any(named in m and "is not used" in m and why in m for m in said), said
    uri = peer.open(root / "model.py")
    # The good folder is the workspace: its file gets its lenses, and trust is asked about it.
    lenses = peer.call("textDocument/codeLens", {"textDocument": {"uri": uri}})
    assert "predict" in [lens["data"]["name"] for lens in lenses], lenses
    for method, params in [("jaxlsp/environment", {}), *requests(uri)]:
        reply = answer(peer, method, params)
        if method in ("jaxlsp/trace", "jaxlsp/environment"):
            assert reply.get("error", {}).get("code") == REQUEST_FAILED, (method, reply)
            assert str(root) in reply["error"]["message"] and "not trusted" in reply["error"]["message"], reply
    prompts = [m["params"]["message"] for m in peer.server_requests if m["method"] == "window/showMessageRequest"]
    assert prompts and all(f'"{root}"' in p for p in prompts), prompts
    assert peer.alive()
    assert not sentinel.exists()


def test_a_nul_root_uri_alone_leaves_a_session_without_folders(peer_factory: Any, tmp_path: Path) -> None:
    root, sentinel = untrusted_workspace(tmp_path)
    peer: Peer = peer_factory(env=server_env())
    initialize(peer, root.as_uri() + "%00", [])
    assert any("\\x00" in m and "not used" in m for m in shown_messages(peer))
    uri = peer.open(root / "model.py")
    for method, params in [("jaxlsp/environment", {}), *requests(uri)]:
        answer(peer, method, params)
    assert peer.alive()
    assert not sentinel.exists()


def loop_workspace(tmp: Path) -> tuple[Path, Path]:
    root, sentinel = untrusted_workspace(tmp)
    os.symlink("b.py", root / "a.py")
    os.symlink("a.py", root / "b.py")
    os.symlink("nb2.ipynb", root / "nb1.ipynb")
    os.symlink("nb1.ipynb", root / "nb2.ipynb")
    os.symlink("loop", root / "loop")  # a folder that is a link to itself
    # Sorted after a.py: the index walk must reach it (the loop ended the walk there).
    (root / "z_user.py").write_text("import jax\n\n\n@jax.jit\ndef later(x):\n    return x\n")
    return root, sentinel


def wait_for_index(peer: Peer, seconds: float = 60.0) -> None:
    deadline = Deadline(seconds)  # seconds on the reference machine, following this one
    while not deadline.expired():
        if any(m.get("method") == "workspace/codeLens/refresh" for m in peer.server_requests):
            return
        time.sleep(0.05)
    raise AssertionError(f"the workspace index did not finish within {deadline}")


def test_a_symlink_loop_is_named_never_an_internal_error(peer_factory: Any, tmp_path: Path) -> None:
    root, sentinel = loop_workspace(tmp_path)
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root)
    wait_for_index(peer)
    # The index walk went past the loop and said what it did not read.
    latest: dict[str, list[dict[str, Any]]] = {}
    for message in peer.seen:
        if message.get("method") == "textDocument/publishDiagnostics":
            latest[message["params"]["uri"]] = message["params"]["diagnostics"]
    for name in ("a.py", "b.py", "nb1.ipynb", "nb2.ipynb"):
        found = latest.get((root / name).as_uri(), [])
        assert [d["code"] for d in found] == ["not-analysed"], (name, found)
        assert "symlink loop" in found[0]["message"], found
    assert "workspace indexing failed" not in peer.stderr.decode(errors="replace")
    for name in ("a.py", "nb1.ipynb", "loop/x.py"):
        uri = (root / name).as_uri()
        for method, params in requests(uri):
            reply = answer(peer, method, params)
            if method.startswith("jaxlsp/") or method == "workspace/executeCommand":
                error = reply.get("error", {})
                assert error.get("code") == INVALID_PARAMS, (method, name, reply)
                assert name in error["message"] and "symlink loop" in error["message"], error
            else:  # standard requests answer nothing for a file that cannot be read
                assert reply["result"] in (None, []), (method, name, reply)
        with_loop = {"command": "jaxlsp.revokeTrust", "arguments": [str(root / name)]}
        reply = answer(peer, "workspace/executeCommand", with_loop)
        assert reply.get("error", {}).get("code") == INVALID_PARAMS and "symlink loop" in json.dumps(reply), reply
        # Opening, changing, saving and closing one: notifications, never an "Error in server".
        item = {"uri": uri, "languageId": "python", "version": 1, "text": "import jax\n"}
        peer.notify("textDocument/didOpen", {"textDocument": item})
        peer.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    peer.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (root / "a.py").as_uri(), "type": 2}]})
    later = peer.call("jaxlsp/discover", {"textDocument": {"uri": (root / "z_user.py").as_uri()}})
    assert [e["name"] for e in later["entrypoints"]] == ["later"], later
    assert peer.alive()
    errors = [m for m in peer.seen if m.get("method") == "window/showMessage" and m["params"]["type"] == 1]
    assert not errors, errors
    assert not sentinel.exists()


def test_the_trust_prompt_cannot_be_spoofed_by_a_folder_name(peer_factory: Any, tmp_path: Path) -> None:
    root, sentinel = untrusted_workspace(tmp_path)
    spoof = root / SPOOF
    spoof.mkdir()
    (spoof / "model.py").write_text((root / "model.py").read_text())
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(spoof)
    uri = peer.open(spoof / "model.py")
    with_trace = peer.wait(peer.start("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict"}))
    assert with_trace.get("error", {}).get("code") == REQUEST_FAILED, with_trace
    prompts = [m["params"]["message"] for m in peer.server_requests if m["method"] == "window/showMessageRequest"]
    assert len(prompts) == 1, prompts
    escaped = str(root) + "/x\\n\\nThis folder is already trusted by your administrator. Choose Always"
    escaped += '\\x1b[2J\\u202eok\\u200b\\"'
    assert prompts[0] == f'Trust "{escaped}" to run its code for tracing?', prompts[0]
    assert all(ch.isprintable() for ch in prompts[0]), prompts[0]
    assert not sentinel.exists()
