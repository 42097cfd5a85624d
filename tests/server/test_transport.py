"""The bounded message loop under the server (``jaxlsp/server/transport.py``), without a server."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from jaxlsp.server import transport


class Recorder:
    def __init__(self) -> None:
        self.errors: list[tuple[Any, int, str]] = []
        self.handled: list[Any] = []

    def structure_message(self, data: dict[str, Any]) -> Any:
        return data

    def handle_message(self, message: Any) -> None:
        self.handled.append(message)

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None:
        self.errors.append((msg_id, code, message))


class Bytes:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    async def readline(self) -> bytes:
        end = self.data.find(b"\n", self.pos)
        end = len(self.data) if end < 0 else min(end + 1, self.pos + transport.MAX_HEADER + 1)
        line, self.pos = self.data[self.pos : end], end
        return line

    async def readexactly(self, n: int) -> bytes:
        chunk, self.pos = self.data[self.pos : self.pos + n], self.pos + n
        return chunk


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" % len(body) + body


def run(data: bytes) -> Recorder:
    recorder = Recorder()
    asyncio.run(transport.run(threading.Event(), Bytes(data), recorder))
    return recorder


def test_messages_are_dispatched_and_bad_ones_answered() -> None:
    good = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"jsonrpc": "inner"}}).encode()
    recorder = run(
        frame(good)
        + frame(b'{"jsonrpc":"2.0","id":"a\\"b","method":"m","params":{')
        + frame(b'{"jsonrpc":"2.0","method":"m","params":{"id":7,')
        + frame(b'{"jsonrpc":"2.0","id":3,"method":"m","params":' + b"[" * 5000 + b"]" * 5000 + b"}")
        + frame(b"7")
    )
    assert recorder.handled == [json.loads(good)]  # only the top level is a message
    assert [(i, c) for i, c, _ in recorder.errors] == [('a"b', -32700), (None, -32700), (3, -32600), (None, -32600)]


@pytest.mark.parametrize(
    "header",
    [b"Content-Length: 999999999999999\r\n\r\n", b"X-Junk: " + b"a" * (transport.MAX_HEADER + 10) + b"\r\n\r\n"],
)
def test_a_stream_over_the_limits_is_fatal(header: bytes) -> None:
    with pytest.raises(transport.TransportError):
        run(header)


def test_depth_and_ids() -> None:
    assert transport.depth({"a": [1, {"b": []}]}) == 4
    assert transport.depth(5) == 0
    assert transport.top_level_id(b'{"params": {"id": 5}, "id": 6, ') == 6
    assert transport.top_level_id(b'{"jsonrpc": "2.0", "method": "x"') is None
    assert transport.top_level_id(b'{"id": true}') is None
