"""The loopback bridge on its own (no language server): callbacks, limits, events, stop."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from jaxlsp.server.viewer_http import MAX_BODY, Bridge, BridgeError, Callbacks
from tests.deadlines import scaled


class Fake:
    def __init__(self) -> None:
        self.revealed: list[tuple[str, str, int | None]] = []

    def graph(self, trace_id: str) -> bytes:
        if trace_id != "t1":
            raise BridgeError(404, f"unknown trace: {trace_id}")
        return b'{"format": "jaxlsp.graph"}'

    def stale(self, trace_id: str) -> bool:
        return True

    def analysis(self, trace_id: str) -> dict[str, Any]:
        if trace_id != "t1":
            raise BridgeError(404, f"unknown trace: {trace_id}")
        return {"measured": True}

    def diff(self, trace_id: str, base: str | None) -> dict[str, Any]:
        if base is None:
            raise BridgeError(404, "no earlier trace of this target is kept to compare with")
        return {"same": False, "base": base, "traceId": trace_id}

    async def reveal(self, trace_id: str, node_id: str, frame: int | None) -> dict[str, Any]:
        self.revealed.append((trace_id, node_id, frame))
        if node_id != "n0":
            raise BridgeError(404, f"unknown node {node_id}")
        return {"location": {"uri": "file:///m.py"}}


@pytest.fixture
async def bridge() -> Any:
    fake = Fake()
    b = Bridge(
        Callbacks(graph=fake.graph, stale=fake.stale, reveal=fake.reveal, analysis=fake.analysis, diff=fake.diff)
    )
    await b.start()
    yield b, fake
    await b.stop()


async def _raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), scaled(10))
    writer.close()
    return answer


def _request(b: Bridge, method: str, target: str, body: bytes = b"", host: str | None = None) -> bytes:
    head = f"{method} {target} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{b.port}'}\r\n"
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


async def test_graph_reveal_and_their_errors(bridge: Any) -> None:
    b, fake = bridge
    t = b.token
    answer = await _raw(b.port, _request(b, "GET", f"/graph?token={t}&trace=t1"))
    assert _status(answer) == 200 and b"X-Jaxlsp-Stale: 1" in answer and answer.endswith(b'"jaxlsp.graph"}')
    assert _status(await _raw(b.port, _request(b, "GET", f"/graph?token={t}&trace=t2"))) == 404
    body = json.dumps({"traceId": "t1", "nodeId": "n0", "frame": 1}).encode()
    answer = await _raw(b.port, _request(b, "POST", f"/reveal?token={t}", body))
    assert _status(answer) == 200 and fake.revealed == [("t1", "n0", 1)]
    for bad in (b'{"traceId": "t1", "nodeId": "n0", "frame": -1}', b'{"traceId": 1, "nodeId": "n0"}', b"[]"):
        assert _status(await _raw(b.port, _request(b, "POST", f"/reveal?token={t}", bad))) == 400, bad
    bad_node = json.dumps({"traceId": "t1", "nodeId": "n9"}).encode()
    answer = await _raw(b.port, _request(b, "POST", f"/reveal?token={t}", bad_node))
    assert _status(answer) == 404 and b"unknown node n9" in answer


async def test_analysis_and_diff(bridge: Any) -> None:
    b, _ = bridge
    t = b.token
    answer = await _raw(b.port, _request(b, "GET", f"/analysis?token={t}&trace=t1"))
    assert _status(answer) == 200 and answer.endswith(b'{"measured":true}')
    assert _status(await _raw(b.port, _request(b, "GET", f"/analysis?token={t}&trace=t2"))) == 404
    answer = await _raw(b.port, _request(b, "GET", f"/diff?token={t}&trace=t1&base=t0"))
    assert _status(answer) == 200 and b'"base":"t0"' in answer
    answer = await _raw(b.port, _request(b, "GET", f"/diff?token={t}&trace=t1"))
    assert _status(answer) == 404 and b"no earlier trace" in answer
    assert _status(await _raw(b.port, _request(b, "GET", "/diff?trace=t1&base=t0"))) == 403  # no token
    assert _status(await _raw(b.port, _request(b, "POST", f"/analysis?token={t}&trace=t1"))) == 405


async def test_limits_and_refusals(bridge: Any) -> None:
    b, _ = bridge
    t = b.token
    too_big = f"POST /reveal?token={t} HTTP/1.1\r\nHost: 127.0.0.1:{b.port}\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n"
    assert _status(await _raw(b.port, too_big.encode())) == 400
    # A head without end or past the limit closes the connection without an answer.
    assert await _raw(b.port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n") == b""
    assert _status(await _raw(b.port, b"NONSENSE\r\n\r\n")) == 400
    assert _status(await _raw(b.port, _request(b, "GET", f"/graph?token={t}&trace=t1", host="evil:1"))) == 403
    assert _status(await _raw(b.port, _request(b, "GET", "/graph?trace=t1&token=" + "A" * len(t)))) == 403
    assert _status(await _raw(b.port, _request(b, "DELETE", f"/graph?token={t}"))) == 405
    assert _status(await _raw(b.port, _request(b, "GET", f"/index.html?token={t}"))) == 404


async def test_events_reach_open_pages_and_stop_ends_them(bridge: Any) -> None:
    b, _ = bridge
    reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
    writer.write(_request(b, "GET", f"/events?token={b.token}"))
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b": jaxlsp\n\n"), scaled(10))
    assert b"text/event-stream" in head and b"Access-Control" not in head

    async def registered() -> None:
        while b.pages == 0:  # the page's queue is registered right after the head is sent
            await asyncio.sleep(0.01)

    await asyncio.wait_for(registered(), scaled(10))
    b.push("highlight", {"traceId": "t1", "nodeIds": ["n0", "n1"]})
    event = await asyncio.wait_for(reader.readuntil(b"\n\n"), scaled(10))
    assert event == b'event: highlight\ndata: {"traceId":"t1","nodeIds":["n0","n1"]}\n\n'
    await b.stop()
    assert await asyncio.wait_for(reader.read(), scaled(10)) == b""  # the stream ends with the bridge
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", b.port)


async def _closed_by_server(reader: asyncio.StreamReader, deadline: float) -> bool:
    """Whether the server ends the connection (EOF or reset) within ``deadline`` seconds."""
    try:
        return await asyncio.wait_for(reader.read(), deadline) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


async def test_idle_connections_without_a_token_are_bounded(bridge: Any) -> None:
    """Anyone on the machine can connect: 200 idle connections hold at most 64 of the server's
    descriptors, and those only for 5 s before their request line; a page is served after."""
    b, _ = bridge
    opened = [await asyncio.open_connection("127.0.0.1", b.port) for _ in range(200)]
    started = time.monotonic()
    # Over the cap: closed at once, unread.
    closed = await asyncio.gather(*(_closed_by_server(reader, 3.0) for reader, _ in opened))
    refused = sum(closed)
    assert refused >= 200 - 64, f"{refused} of 200 idle connections refused; the rest hold descriptors"
    # Within it: closed when the request line has not come in time (today: 10 s).
    kept = [reader for (reader, _), gone in zip(opened, closed, strict=True) if not gone]
    assert all(await asyncio.gather(*(_closed_by_server(reader, 8.0) for reader in kept)))
    waited = time.monotonic() - started
    assert waited < 9.0, waited
    for _, writer in opened:
        writer.close()
    answer = await _raw(b.port, _request(b, "GET", f"/graph?token={b.token}&trace=t1"))
    assert _status(answer) == 200
