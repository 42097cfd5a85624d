"""Broken framing, cancel storms and lone surrogates against the real server over stdio (raw
frames, see ``helpers.Peer``).

A header the reader cannot use (``Content-Length: -5``, ``0x20``), a length one byte short or too
long, a body with no header: the request whose framing broke is answered (``-32600``, or
``-32700`` for a body cut short) and the next request is answered as usual; before, the server
stayed alive and never answered anything again. Cancels of requests that wait on the client (a
trust prompt) leave nothing on stderr; before, each late answer was an ``InvalidStateError``
traceback.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.server import transport
from tests.deadlines import Deadline, scaled
from tests.robustness.helpers import HOLD, Peer, record, server_env, untrusted_workspace

INVALID_REQUEST, PARSE_ERROR, CANCELLED = -32600, -32700, -32800
MARKER = b"(framing marker, 28 bytes)\r\n"  # a line that is not a header: skipped with a log line


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Peer, Path]]:
    root, _ = untrusted_workspace(tmp_path_factory.mktemp("framing"))
    peer = Peer(env=server_env())
    peer.initialize(root)
    peer.open(root / "model.py")
    yield peer, root
    peer.close()


def write(peer: Peer, data: bytes) -> None:
    assert peer.proc.stdin is not None
    with peer._write_lock:
        peer.proc.stdin.write(data)
        peer.proc.stdin.flush()


def fresh_id(peer: Peer) -> int:
    """An id the peer has not used, for a request the test frames itself."""
    with peer._lock:
        peer._next += 1
        return peer._next


def listed(ident: int) -> bytes:
    body = {"jsonrpc": "2.0", "id": ident, "method": "workspace/executeCommand"}
    body["params"] = {"command": "jaxlsp.listTrusted", "arguments": []}  # type: ignore[assignment]
    return json.dumps(body).encode()


def stderr_after(peer: Peer, mark: int, seconds: float = 30.0) -> str:
    """The server's stderr from ``mark`` on, up to the line it logs for a marker (a line that is
    not a header, sent now with a request after it): every message before the marker has been
    handled by then, so what it left on stderr is there."""
    ident = fresh_id(peer)
    write(peer, MARKER + b"Content-Length: %d\r\n\r\n" % len(listed(ident)) + listed(ident))
    assert peer.wait(ident)["result"] == []
    logged = f"skipped {len(MARKER)} bytes"
    deadline = Deadline(seconds)  # seconds on the reference machine, following this one
    while logged.encode() not in peer.stderr[mark:] and not deadline.expired():
        time.sleep(0.01)  # the reader thread copies stderr on its own schedule
    text = peer.stderr[mark:].decode(errors="replace")
    assert logged in text, text[-2000:]
    return text[: text.index(logged)].rpartition("\n")[0]


CASES = {
    "minus-5": (lambda body: b"Content-Length: -5\r\n\r\n" + body, INVALID_REQUEST),
    "hex": (lambda body: b"Content-Length: 0x%x\r\n\r\n" % len(body) + body, INVALID_REQUEST),
    "one-short": (lambda body: b"Content-Length: %d\r\n\r\n" % (len(body) - 1) + body, PARSE_ERROR),
    "no-header": (lambda body: body, INVALID_REQUEST),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_framing_is_answered_and_the_session_goes_on(served: tuple[Peer, Path], case: str) -> None:
    peer, _ = served
    shape, code = CASES[case]
    broken, next_id = fresh_id(peer), fresh_id(peer)
    write(peer, shape(listed(broken)))
    reply = peer.wait(broken)  # answered at once, not when another message comes
    assert reply["error"]["code"] == code, reply
    peer.send_raw(listed(next_id))
    assert peer.wait(next_id)["result"] == []
    assert peer.alive()


def test_a_length_too_long_reads_the_next_message_too(served: tuple[Peer, Path]) -> None:
    peer, _ = served
    first, second = listed(5001), listed(5002)
    write(peer, b"Content-Length: %d\r\n\r\n" % (len(first) + 3) + first)
    write(peer, b"Content-Length: %d\r\n\r\n" % len(second) + second)
    assert peer.wait(5001)["result"] == []
    assert peer.wait(5002)["result"] == []


def test_broken_framing_logs_one_line_and_no_traceback(served: tuple[Peer, Path]) -> None:
    peer, _ = served
    mark = len(peer.stderr)
    write(peer, b"Content-Length: -5\r\n\r\n" + listed(6001))
    assert peer.wait(6001)["error"]["code"] == INVALID_REQUEST
    peer.send_raw(listed(6002))  # the header the reader resynchronises on
    assert peer.wait(6002)["result"] == []
    err = stderr_after(peer, mark)
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "not a byte count (b'-5')" in err and "answered request 6001" in err, err


def test_a_cancel_storm_leaves_stderr_quiet(served: tuple[Peer, Path]) -> None:
    """Traces that wait on the trust prompt, cancelled, then the prompts answered; cancels of
    finished and unknown requests on top."""
    peer, root = served
    uri = (root / "model.py").as_uri()
    prompts: list[dict[str, Any]] = []
    peer.answers["window/showMessageRequest"] = lambda params: HOLD
    try:
        count = 40
        traces = [peer.start("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict"}) for _ in range(count)]
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline:
            prompts = [m for m in peer.server_requests if m["method"] == "window/showMessageRequest"]
            if len(prompts) >= count:
                break
            time.sleep(0.01)
        assert len(prompts) >= count, f"{len(prompts)} trust prompts of {count}"
        mark = len(peer.stderr)
        for ident in traces:
            peer.notify("$/cancelRequest", {"id": ident})
        assert all(peer.wait(ident)["error"]["code"] == CANCELLED for ident in traces)
        for prompt in prompts:  # late answers to requests whose waiter is gone
            peer.send({"jsonrpc": "2.0", "id": prompt["id"], "result": {"title": "Cancel"}})
        for ident in [*traces, 10**9, "no-such-request"] * 20:
            peer.notify("$/cancelRequest", {"id": ident})
        assert peer.alive()
        err = stderr_after(peer, mark)
    finally:
        peer.answers["window/showMessageRequest"] = lambda params: {"title": "Cancel"}
        peer.server_requests.clear()
    record(
        framing_cancel_storm_stderr_lines=len(err.splitlines()), framing_cancel_storm_tracebacks=err.count("Traceback")
    )
    assert "Traceback" not in err and "InvalidStateError" not in err, err[-3000:]
    assert len(err.splitlines()) <= 1, err[-3000:]


LONE = "\ud800"  # valid JSON as an escape, not Unicode text


def surrogate_requests(root: Path) -> list[tuple[str, Any]]:
    uri = root.as_uri() + f"/model{LONE}.py"
    doc = {"textDocument": {"uri": uri}}
    at = {**doc, "position": {"line": 0, "character": 0}}
    span = {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}}
    return [
        ("jaxlsp/discover", doc),
        ("jaxlsp/nodesAt", {**at, "traceId": "t"}),
        ("textDocument/hover", at),
        ("textDocument/codeLens", doc),
        ("textDocument/inlayHint", {**doc, "range": span}),
        ("textDocument/codeAction", {**doc, "range": span, "context": {"diagnostics": []}}),
        ("jaxlsp/trace", {**doc, "name": "predict"}),
        ("workspace/executeCommand", {"command": "jaxlsp.revokeTrust", "arguments": [str(root) + LONE]}),
    ]


def test_lone_surrogates_in_requests_are_invalid_params(served: tuple[Peer, Path]) -> None:
    peer, root = served
    for method, params in surrogate_requests(root):
        assert LONE in json.dumps(params, ensure_ascii=False), params  # sent as the escape \ud800
        reply = peer.wait(peer.start(method, params))
        assert reply.get("error", {}).get("code") == -32602, (method, reply)
        assert "lone surrogate" in reply["error"]["message"] and "params." in reply["error"]["message"], reply
    assert peer.alive()


def test_a_document_with_lone_surrogates_is_kept_with_them_replaced(served: tuple[Peer, Path]) -> None:
    peer, root = served
    path = root / "model.py"
    text = path.read_text()
    uri = peer.open(path, f"# a comment {LONE} here\n" + text, version=50)
    deadline = time.monotonic() + scaled(30)
    shown: list[dict[str, Any]] = []
    while not shown and time.monotonic() < deadline:
        shown = [m for m in peer.seen if m.get("method") == "window/showMessage" and "surrogate" in str(m)]
        time.sleep(0.01)
    assert shown and "params.textDocument.text" in shown[0]["params"]["message"], shown
    names = [e["name"] for e in peer.call("jaxlsp/discover", {"textDocument": {"uri": uri}})["entrypoints"]]
    assert names == ["predict", "MLP"]
    for method, params in [
        ("textDocument/codeLens", {"textDocument": {"uri": uri}}),
        ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 14}}),
    ]:
        assert "result" in peer.wait(peer.start(method, params)), method
    change = {"textDocument": {"uri": uri, "version": 51}, "contentChanges": [{"text": text + LONE}]}
    peer.notify("textDocument/didChange", change)
    assert [e["name"] for e in peer.call("jaxlsp/discover", {"textDocument": {"uri": uri}})["entrypoints"]] == names
    peer.notify(
        "textDocument/didChange", {"textDocument": {"uri": uri, "version": 52}, "contentChanges": [{"text": text}]}
    )
    assert b"Traceback" not in peer.stderr, peer.stderr[-3000:].decode(errors="replace")


def cpu_seconds(pid: int) -> float:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    fields = raw[raw.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_long_lists_are_refused_before_structuring_and_memory_comes_back(peer_factory: Any, tmp_path: Path) -> None:
    """16,000 diagnostics (or characters, or numbers) in a code action, then a 64 MiB hover of 15
    million empty objects: each -32602 naming the key (16,000 diagnostics were structured and
    answered, 1.4 s; the string took 5 s of CPU, one failure per character; the 64 MiB hover 45 s),
    and the server's memory comes back after the refusal."""
    root, _ = untrusted_workspace(tmp_path)
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root)
    uri = peer.open(root / "model.py")
    span = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    diagnostic = {"range": span, "message": "m"}
    figures: dict[str, Any] = {}
    before = cpu_seconds(peer.proc.pid)
    for name, diagnostics in [("chars", "x" * 16_000), ("items", [diagnostic] * 16_000), ("numbers", [1] * 16_000)]:
        params = {"textDocument": {"uri": uri}, "range": span, "context": {"diagnostics": diagnostics}}
        reply = peer.wait(peer.start("textDocument/codeAction", params))
        assert reply.get("error", {}).get("code") == -32602, (name, str(reply)[:300])
        if name != "chars":  # a string where a list belongs fails at its first character: no path
            assert reply["error"]["message"].startswith("params.context.diagnostics: too long (16,000 items"), reply
    figures["framing_code_action_refusals_cpu_s"] = round(cpu_seconds(peer.proc.pid) - before, 3)
    # generous: structuring them took about 10 s of CPU; refusing them costs milliseconds
    assert figures["framing_code_action_refusals_cpu_s"] < 2.0, figures

    rss_before = peer.rss_mb()
    body = json.dumps(
        {"jsonrpc": "2.0", "id": "big", "method": "textDocument/hover", "params": {"pad": [{}] * 15_000_000}}
    ).encode()
    assert len(body) < 64 * 1024 * 1024
    before = cpu_seconds(peer.proc.pid)
    peer.send_raw(body)
    del body
    reply = peer.wait("big", timeout=scaled(120))  # type: ignore[arg-type]
    assert reply["error"]["code"] == -32602, str(reply)[:300]
    assert reply["error"]["message"] == "params.pad: too long (15,000,000 items; at most 10,000)", reply
    assert peer.alive()
    figures |= {
        "framing_64mib_hover_cpu_s": round(cpu_seconds(peer.proc.pid) - before, 2),
        "framing_64mib_rss_before_mb": round(rss_before),
        "framing_64mib_rss_peak_mb": round(peak_mb(peer.proc.pid)),
        "framing_64mib_rss_after_mb": round(peer.rss_mb()),
    }
    record(**figures)
    assert figures["framing_64mib_rss_after_mb"] < rss_before + 200, figures


@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="pipe sizes are Linux's")
def test_the_servers_pipes_hold_a_megabyte(tmp_path: Path) -> None:
    # Through 64 KiB pipes a 1.2 MB didOpen took 20 turns of the loop to read, and a hover behind
    # it waited 160-210 ms in the soak (issue 25); the server widens both of its pipes.
    peer = Peer(env=server_env())
    try:
        peer.initialize(tmp_path)
        assert fcntl.fcntl(peer.proc.stdin.fileno(), fcntl.F_GETPIPE_SZ) >= transport.PIPE_BUFFER  # type: ignore[union-attr]
        assert fcntl.fcntl(peer.proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) >= transport.PIPE_BUFFER  # type: ignore[union-attr]
    finally:
        peer.close()
