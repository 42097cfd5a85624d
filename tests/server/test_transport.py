"""The bounded message loop under the server (``jaxlsp/server/transport/``), without a server."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

import pytest

from jaxlsp.server import lookahead, transport
from jaxlsp.server.transport import framing
from jaxlsp.server.transport.messages import oversized, top_level_id
from jaxlsp.server.transport.streams import PipeInput
from jaxlsp.server.transport.writer import pipe_capacity
from tests.deadlines import scaled


class Recorder:
    def __init__(self) -> None:
        self.errors: list[tuple[Any, int, str]] = []
        self.handled: list[Any] = []
        self.notified: list[tuple[str, Any]] = []

    def structure_message(self, data: dict[str, Any]) -> Any:
        return data

    def handle_message(self, message: Any) -> None:
        self.handled.append(message)

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None:
        self.errors.append((msg_id, code, message))

    def notify(self, method: str, params: Any = None) -> None:
        self.notified.append((method, params))


class Bytes:
    def __init__(self, data: bytes, chunk: int = transport.CHUNK) -> None:
        self.data = data
        self.pos = 0
        self.chunk = chunk  # bytes one readsome gives: small ones split headers across reads

    async def readexactly(self, n: int) -> bytes:
        chunk, self.pos = self.data[self.pos : self.pos + n], self.pos + n
        return chunk

    async def readsome(self) -> bytes:
        return await self.readexactly(self.chunk)


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" % len(body) + body


def run(data: bytes, chunk: int = transport.CHUNK) -> Recorder:
    recorder = Recorder()
    asyncio.run(transport.run(threading.Event(), Bytes(data, chunk), recorder))
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
    assert oversized({"params": json.loads("[" * 63 + "]" * 63)}) is None  # 64 levels with the message
    assert oversized({"params": json.loads("[" * 64 + "]" * 64)}) == (
        -32600,
        "the message nests deeper than 64 levels",
    )
    assert top_level_id(b'{"params": {"id": 5}, "id": 6, ') == 6
    assert top_level_id(b'{"jsonrpc": "2.0", "method": "x"') is None
    assert top_level_id(b'{"id": true}') is None


def request(ident: int, pad: str = "") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "m", "params": {"pad": pad}}).encode()


@pytest.mark.parametrize("chunk", [transport.CHUNK, 5])
@pytest.mark.parametrize(
    ("broken", "answered"),
    [
        # a length that is not a byte count: the request it framed is answered -32600, by its id
        (b"Content-Length: -5\r\n\r\n" + request(1), [(1, -32600)]),
        (b"Content-Length: 0x20\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" + request(1), [(1, -32600)]),
        (b"Content-Length: \r\n\r\n" + request(1), [(1, -32600)]),
        (b"Content-Length: 12\r\nContent-Length: 13\r\n\r\n" + request(1), [(1, -32600)]),
        (b"Content-Length: -5\r\n" + request(1), [(1, -32600)]),  # no blank line either
        (b"Content-Length: 1e3\r\n\r\n" + request(1, "x" * 100_000), [(1, -32600)]),  # a body over 8 KiB
        # one byte short: the cut body is -32700, its last byte is skipped with the next header
        (b"Content-Length: %d\r\n\r\n" % (len(request(1)) - 1) + request(1), [(1, -32700)]),
        (b"Content-Length: %d\r\n\r\n" % (len(request(1)) - 20) + request(1), [(1, -32700)]),
        (b"Content-Length: -5\r\n\r\n" + b'{"id": 1}', [(1, -32600)]),  # shorter than what is kept back
        # a body with no header at all, and a line of junk
        (request(1), [(1, -32600)]),
        (b"hello\r\n", []),
    ],
    ids=[
        "minus-5",
        "hex",
        "empty",
        "two-lengths",
        "no-blank-line",
        "big-body",
        "1-short",
        "20-short",
        "short-body",
        "no-header",
        "junk",
    ],
)
def test_broken_framing_resynchronises_on_the_next_header(
    broken: bytes, answered: list[tuple[int, int]], chunk: int
) -> None:
    recorder = run(broken + frame(request(2)) + frame(request(3)), chunk)
    assert [(i, c) for i, c, _ in recorder.errors] == answered
    assert [m["id"] for m in recorder.handled] == [2, 3]  # nothing after the break is lost


@pytest.mark.parametrize("extra", [1, 10, 30])
def test_a_length_too_long_gives_back_what_it_took_of_the_next_message(extra: int) -> None:
    first, second = request(1), frame(request(2))
    recorder = run(b"Content-Length: %d\r\n\r\n" % (len(first) + extra) + first + second + frame(request(3)))
    assert recorder.errors == []
    assert [m["id"] for m in recorder.handled] == [1, 2, 3]


def test_broken_framing_at_the_end_of_the_stream_ends_quietly() -> None:
    for data in (b"Content-Length: -5\r\n\r\n" + request(1), b"Content-Length: -5\r\n", b"junk"):
        recorder = run(frame(request(1)) + data)
        assert [m["id"] for m in recorder.handled] == [1]


def test_a_stream_with_no_header_is_given_up_after_the_message_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "MAX_SKIP", 1000)
    with pytest.raises(transport.TransportError, match="no message header"):
        run(b"Content-Length: -5\r\n\r\n" + b"x" * 5000)


def test_oversized_lists_are_refused_by_key_path_before_structuring() -> None:
    diagnostic = {"range": {}, "message": "m"}
    too_many = {"context": {"diagnostics": [diagnostic] * 16_000}}
    recorder = run(
        frame(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "textDocument/codeAction", "params": too_many}).encode())
        + frame(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "m", "params": {"a": [[0] * 5000] * 200}}).encode())
        + frame(json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"a": [0] * 20_000}}).encode())
        + frame(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "m", "params": {"a": [0] * 9_000}}).encode())
    )
    assert [(i, c) for i, c, _ in recorder.errors] == [(1, -32602), (2, -32602)]
    assert recorder.errors[0][2] == "params.context.diagnostics: too long (16,000 items; at most 10,000)"
    assert "over 500,000 values" in recorder.errors[1][2]
    assert [m["id"] for m in recorder.handled] == [3]  # the notification is dropped (logged)


def test_watched_file_changes_may_be_long() -> None:
    changes = [{"uri": f"file:///w/f{i}.py", "type": 2} for i in range(16_000)]
    message = {"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles", "params": {"changes": changes}}
    assert oversized(message) is None
    message["params"] = {"changes": changes * 7}
    assert oversized(message) == (-32602, "params.changes: too long (112,000 items; at most 100,000)")


def test_lone_surrogates_are_refused_in_requests_and_replaced_in_notifications() -> None:
    recorder = run(
        frame(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"textDocument":{"uri":"file:///a\\ud800.py"}}}')
        + frame(b'{"jsonrpc":"2.0","id":2,"method":"m","params":{"k\\udfff":1}}')
        + frame(b'{"jsonrpc":"2.0","id":3,"method":"m","params":{"text":"\\ud83d\\ude00 paired"}}')
        + frame(b'{"jsonrpc":"2.0","method":"n","params":{"changes":[{"text":"a\\ud800b"}]}}')
    )
    assert recorder.errors == [
        (1, -32602, "params.textDocument.uri: holds a lone surrogate (not Unicode text)"),
        (2, -32602, r"params.k\udfff (a key): holds a lone surrogate (not Unicode text)"),
    ]
    assert [m.get("id") for m in recorder.handled] == [3, None]
    assert recorder.handled[0]["params"]["text"] == "\U0001f600 paired"
    assert recorder.handled[1]["params"]["changes"][0]["text"] == "a\ufffdb"  # one unit for one
    ((method, params),) = recorder.notified
    assert method == "window/showMessage" and "params.changes[0].text" in params.message


def test_the_tcp_reader_resynchronises_too() -> None:
    async def main() -> Recorder:
        stream = asyncio.StreamReader(limit=transport.MAX_HEADER + 1)
        stream.feed_data(b"Content-Length: 0x20\r\n\r\n" + request(1, "x" * 20_000) + frame(request(2)))
        stream.feed_eof()
        recorder = Recorder()
        await transport.run(threading.Event(), transport.StreamReader(stream), recorder)
        return recorder

    recorder = asyncio.run(main())
    assert [(i, c) for i, c, _ in recorder.errors] == [(1, -32600)]
    assert [m["id"] for m in recorder.handled] == [2]


# -- the writer ---------------------------------------------------------------------------------

WRITER_DEADLINE = 10.0  # seconds on the reference machine: a liveness bound (the writes take microseconds)


def read_until_closed(writer: transport.ThreadedWriter, read_fd: int) -> bytes:
    """All the pipe ``read_fd`` gets while ``writer`` sends what is queued and closes."""
    received = bytearray()
    with os.fdopen(read_fd, "rb") as out:
        closing = threading.Thread(target=writer.close, daemon=True)
        closing.start()  # sends what is queued, then closes: the reader sees the end
        while chunk := out.read(65536):
            received += chunk
        closing.join(scaled(WRITER_DEADLINE))
    return bytes(received)


def test_writes_return_while_the_client_reads_nothing_and_arrive_in_order() -> None:
    """The loop never waits for a client that is slow to read (issue 25: pygls' StdoutWriter wrote
    and flushed in the loop; with the client's pipe full, answering 1,000 traces spent 4.6 s of
    25 s blocked in ``write``). 2 MiB of messages into a 64 KiB pipe that nobody reads yet."""
    read_fd, write_fd = os.pipe()
    stream = os.fdopen(write_fd, "wb")
    writer = transport.ThreadedWriter(stream)
    messages = [b"Content-Length: %d\r\n\r\n" % 1024 + bytes([i % 251]) * 1024 for i in range(2048)]
    done = threading.Event()

    def write_all() -> None:
        for message in messages:
            writer.write(message)
        done.set()

    threading.Thread(target=write_all, daemon=True).start()
    try:
        assert done.wait(scaled(WRITER_DEADLINE)), "a write waited for the client to read"
        assert read_until_closed(writer, read_fd) == b"".join(messages)
    finally:
        writer.close(0)


def test_a_loop_write_the_pipe_has_room_for_goes_out_at_once_not_through_the_thread() -> None:
    """The writer thread, woken for each hand-over, had to win the GIL from a loop that takes it
    back after every select of its short turns: it waited up to 98 ms during the soak's cancel
    storm (issue 25). A hand-over the pipe has room for, with nothing queued before it, is written
    on the loop's thread; one it has no room for, and what comes after it, go through the thread."""
    read_fd, write_fd = os.pipe()
    writer = transport.ThreadedWriter(os.fdopen(write_fd, "wb"))
    queued: list[int] = []
    put = writer._put
    writer._put = lambda data: (queued.append(len(data)), put(data))  # type: ignore[method-assign]
    room = pipe_capacity(writer.stream)[1]

    async def turns() -> None:
        for data in (b"small", b"x" * (room + 1), b"after"):
            writer.write(data)
            writer._hand_over()  # each a hand-over of its own, as turns HAND_OVER_EVERY apart

    try:
        asyncio.run(turns())
        assert queued == [room + 1, 5]
        received = bytearray()
        with os.fdopen(read_fd, "rb") as out:
            while len(received) < room + 11:
                received += out.read1(1 << 20)
        assert bytes(received) == b"small" + b"x" * (room + 1) + b"after"
    finally:
        writer.close(0)


def test_loop_writes_into_a_full_pipe_return_and_arrive_in_order() -> None:
    read_fd, write_fd = os.pipe()
    writer = transport.ThreadedWriter(os.fdopen(write_fd, "wb"))
    messages = [bytes([i % 251]) * 1024 for i in range(2048)]  # 2 MiB into a 64 KiB pipe

    async def turns() -> None:
        for i, message in enumerate(messages):
            writer.write(message)
            if i % 7 == 0:
                await asyncio.sleep(0)

    try:
        asyncio.run(asyncio.wait_for(turns(), scaled(WRITER_DEADLINE)))
        assert read_until_closed(writer, read_fd) == b"".join(messages)
    finally:
        writer.close(0)


class CountedStream:
    """A byte stream that keeps each write it was given."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_what_the_loop_writes_in_one_turn_goes_to_the_writer_thread_at_once() -> None:
    """Answering a burst (1,000 superseded traces) wrote 1,138 messages, each handed to the writer
    thread on its own: each hand-over woke it, 0.37 ms of the loop apiece under cProfile (issue
    25). What one turn of the loop writes is handed over in one piece at the turn's end, in order;
    what another thread writes goes as it comes, and close() sends a turn's writes even if the turn
    never ended."""
    stream = CountedStream()
    writer = transport.ThreadedWriter(stream)  # type: ignore[arg-type]  # only write/flush/close
    messages = [b"Content-Length: 2\r\n\r\n{}" + str(i).encode() for i in range(1000)]

    async def burst() -> None:
        for message in messages:
            writer.write(message)
        await asyncio.sleep(0)  # the turn ends: its writes are handed over

    asyncio.run(burst())
    writer.write(b"from another thread")
    asyncio.run(_write_and_close(writer, b"last turn"))
    assert b"".join(stream.writes) == b"".join(messages) + b"from another thread" + b"last turn"
    assert len(stream.writes) <= 3, len(stream.writes)


async def _write_and_close(writer: transport.ThreadedWriter, data: bytes) -> None:
    writer.write(data)
    writer.close()  # within the turn that wrote it


def test_a_client_gone_stops_the_server_once() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    stopped = threading.Event()
    writer = transport.ThreadedWriter(os.fdopen(write_fd, "wb"), stopped.set)
    writer.write(b"Content-Length: 2\r\n\r\n{}")
    assert stopped.wait(scaled(WRITER_DEADLINE))
    assert writer.broken
    writer.write(b"more")  # dropped, no error
    writer.close()


class Canceller(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[int | str] = []

    def cancel_request(self, msg_id: int | str) -> None:
        self.cancelled.append(msg_id)


def test_cancels_go_straight_to_the_protocol_without_structuring() -> None:
    """A cancel storm is thousands of ``$/cancelRequest`` (the soak's: 5,500), each structured by
    cattrs and dispatched by pygls before it cancelled anything; well-formed ones now go straight to
    ``cancel_request``, and the others take the usual way (where pygls ignores or refuses them)."""
    cancels = [
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "abc"}},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": True}},  # not an id
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "$/cancelRequest", "params": {"id": 8}},  # a request
    ]
    canceller = Canceller()
    data = b"".join(frame(json.dumps(c).encode()) for c in cancels)
    asyncio.run(transport.run(threading.Event(), Bytes(data), canceller))
    assert canceller.cancelled == [7, "abc"]
    assert canceller.handled == cancels[2:]


class _NoPool:
    """An executor that fails the test if a read goes through it."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("stdin was read in the thread pool")


def test_a_piped_stdin_is_read_on_the_loop_not_in_the_pool() -> None:
    # Each read in the pool cost a GIL hand-over while the loop worked: a 10 MB didOpen was 160 of
    # them, and the hovers behind it waited 0.8-1.3 s in the soak (issue 25).
    read_end, write_end = os.pipe()
    body = b"x" * (3 * transport.CHUNK + 5)
    writer = threading.Thread(target=lambda: (os.write(write_end, body), os.close(write_end)))
    writer.start()
    with os.fdopen(read_end, "rb", buffering=0) as stdin:
        reader = transport.StdinReader(stdin, _NoPool())  # type: ignore[arg-type]

        async def read_all() -> bytes:
            first = await asyncio.wait_for(reader.readsome(), scaled(10))
            rest = await asyncio.wait_for(reader.readexactly(len(body) - len(first)), scaled(10))
            end = await asyncio.wait_for(reader.readsome(), scaled(10))
            return first + rest + end

        assert asyncio.run(read_all()) == body
    writer.join()


def test_a_regular_file_as_stdin_is_still_read(tmp_path: Any) -> None:
    path = tmp_path / "messages"
    path.write_bytes(b"abc" * 1000)
    with path.open("rb") as stdin:
        reader = transport.StdinReader(stdin, None)

        async def read() -> bytes:
            return await reader.readexactly(3000) + await reader.readsome()

        assert asyncio.run(read()) == b"abc" * 1000


# -- the look ahead for hovers (jaxlsp/server/lookahead.py) ---------------------------------------


class Buffered(Bytes):
    """A stream whose every byte has arrived: ``ready`` hands out all that is left, as a pipe the
    client wrote a burst into does."""

    def ready(self) -> bytes:
        chunk, self.pos = self.data[self.pos :], len(self.data)
        return chunk


def message(ident: int | None, method: str, params: Any = None) -> bytes:
    data: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if ident is not None:
        data["id"] = ident
    return frame(json.dumps(data).encode())


def handled_order(data: bytes) -> list[Any]:
    recorder = Recorder()
    asyncio.run(transport.run(threading.Event(), Buffered(data), recorder))
    return [m.get("id", m.get("method")) for m in recorder.handled]


def test_a_hover_goes_before_traces_lenses_and_cancels_buffered_ahead_of_it() -> None:
    data = (
        message(1, "jaxlsp/trace")
        + message(2, "textDocument/codeLens")
        + message(None, "$/cancelRequest", {"id": 1})
        + message(3, "jaxlsp/nodesAt")
        + message(4, "textDocument/hover")
        + message(5, "jaxlsp/graph")
        + message(6, "textDocument/hover")
    )
    # The cancel goes to the protocol's cancel_request (the Recorder has none: it is handled).
    assert handled_order(data) == [4, 6, 1, 2, "$/cancelRequest", 3, 5]


@pytest.mark.parametrize(
    "barrier",
    [
        message(None, "textDocument/didChange"),  # the text the hover reads
        message(None, "textDocument/didOpen"),
        message(None, "jaxlsp/cursorMoved"),  # highlights in viewer pages, as a hover does
        message(7, "workspace/executeCommand"),
        message(7, "shutdown"),
        frame(b'{"jsonrpc": "2.0", "id": 99, "result": {"title": "Trust once"}}'),  # a response
        frame(b'{"jsonrpc": "2.0", "id": 7, "method": "jaxlsp/trace"'),  # not JSON
        b"Content-Length: 5\r\nX-Other: 1\r\n\r\n" + b"[1,2]",  # a header block of another form
        frame(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "jaxlsp/trace", "p": "x" * 70_000}).encode()),
    ],
    ids=["didChange", "didOpen", "cursorMoved", "command", "shutdown", "response", "not-json", "other-header", "big"],
)
def test_a_hover_never_goes_past_what_may_change_its_answer(barrier: bytes) -> None:
    order = handled_order(message(1, "jaxlsp/trace") + barrier + message(4, "textDocument/hover"))
    assert order[0] == 1 and order[-1] == 4, order


def test_a_hover_behind_broken_framing_waits_and_the_framing_is_still_answered() -> None:
    recorder = Recorder()
    data = message(1, "jaxlsp/trace") + b"Content-Length: -5\r\n\r\n" + request(2) + message(4, "textDocument/hover")
    asyncio.run(transport.run(threading.Event(), Buffered(data), recorder))
    assert [m["id"] for m in recorder.handled] == [1, 4]
    assert [(i, c) for i, c, _ in recorder.errors] == [(2, -32600)]


def test_the_look_ahead_waits_for_a_hover_still_arriving() -> None:
    """A body or header cut short by the end of what arrived is neither taken nor given up."""
    hover = message(4, "textDocument/hover")
    for cut in (5, len(hover) - 3):
        buffer = message(1, "jaxlsp/trace") + hover[:cut]
        ahead = lookahead.Lookahead()
        assert ahead.find(buffer, 0) is None and not ahead.blocked
        assert ahead.find(buffer + hover[cut:], 0) is not None


def test_each_buffered_message_is_looked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[bytes] = []
    kind = lookahead.kind
    monkeypatch.setattr(lookahead, "kind", lambda body: looked.append(body) or kind(body))
    traces = 3 * lookahead.MAX_FRAMES
    data = b"".join(message(i, "jaxlsp/trace") for i in range(traces)) + message(-1, "textDocument/hover")
    order = handled_order(data)
    # MAX_FRAMES looked at per message handled: the hover goes after three traces, not 3,000.
    assert order.index(-1) == 3 and [i for i in order if i != -1] == list(range(traces))
    assert len(looked) == traces + 1  # not once per message handled (quadratic)


class _Transport:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")


def test_piped_input_pauses_while_the_loop_is_behind_and_resumes_once_read() -> None:
    pipe = PipeInput()
    fake = _Transport()
    pipe._transport = fake  # type: ignore[assignment]
    for _ in range(3):
        pipe.data_received(b"x" * transport.PIPE_BUFFER)
    assert fake.calls == ["pause"]
    assert len(pipe.ready()) == 3 * transport.PIPE_BUFFER
    assert fake.calls == ["pause", "resume"]
    pipe.eof_received()
    assert asyncio.run(pipe.readsome()) == b""
