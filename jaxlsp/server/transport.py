"""The message loop under the server: pygls' stdio/TCP reader, with the limits a client can abuse.

pygls 2.1's ``run_async`` reads a ``Content-Length`` of any size (a header claiming a petabyte
raises MemoryError and the server dies with a traceback), leaves a request unanswered when its
body is not JSON, nests too deeply for ``json.loads``, or does not fit its params type, and hands
every nested object to the protocol's ``object_hook`` (so a ``jsonrpc`` key deep inside params is
taken for a message). This loop keeps pygls' framing and dispatch and adds:

- a 64 MiB cap on a message and 8 KiB on a header line: over it, one log line and exit 1 (the
  stream cannot be resynchronised, and reading the body would hold it all in memory);
- resynchronisation after broken framing (pygls waits forever): a line that is not a header, a
  ``Content-Length`` that is not a decimal count (``-5``, ``0x20``), a body with no header, are
  skipped up to the next ``Content-Length`` header (:func:`resynchronise`, at most 64 MiB); the
  request whose framing broke gets ``-32600`` as soon as its id can be read from what was
  skipped, and one warning says how many bytes were dropped. A length short by a byte leaves the
  end of its body in front of the next header: the body is answered ``-32700`` and the reader
  resynchronises on that header. A length too long swallows the start of the next message: the
  complete message it framed is handled, and the rest is read again as the next header;
- ``-32700`` for a body that is not JSON, with the request's id when one can be read from it;
- ``-32600`` for a message nested deeper than :data:`MAX_DEPTH`, ``-32602`` for a request whose
  params do not fit the method's type, both with the request's id;
- ``-32602`` naming the key path for a list or object over :data:`MAX_ITEMS` members, or a message
  of over :data:`MAX_VALUES` values, checked before structuring (:func:`oversized`): 16,000
  diagnostics in a code action took 1.4 s to structure, a 64 MiB message of small objects minutes;
- ``-32602`` for a request with a lone surrogate (``"\\ud800"``) in a string, and U+FFFD for one
  in a notification (:func:`lone_surrogates`);
- only the top-level object is structured into a message;
- a hover buffered behind requests that cannot change its answer (a burst of traces, lenses,
  cancels) is handled before them (:mod:`jaxlsp.server.lookahead`); stdin's pipe is read by
  :class:`PipeInput`, which keeps everything that arrived in view for that look.

It is a local guard for what belongs upstream in pygls (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import queue
import re
import stat
import struct
import sys
import termios
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.server import loopwatch
from jaxlsp.server.lookahead import Lookahead

log = logging.getLogger(__name__)

MAX_MESSAGE = 64 * 1024 * 1024  # bytes of one message body
MAX_HEADER = 8 * 1024  # bytes of one header line
CHUNK = 64 * 1024  # bytes asked of the stream in one read
PIPE_BUFFER = 1024 * 1024  # bytes of stdin a pipe read on the loop may hold before it pauses
MAX_DEPTH = 64  # nesting of objects and arrays in one message (LSP's own are under 12)
MAX_ITEMS = 10_000  # members of one list or object (params.py allows as many in our own methods)
MAX_VALUES = 500_000  # values in one message, all lists and objects together
# Lists that are long in ordinary use: a branch switch changes every file of a large repository.
LONG_LISTS = {"workspace/didChangeWatchedFiles": {"params.changes": 100_000}}
# A lone surrogate can reach a string only through a \uD800-\uDFFF escape (UTF-8 has no bytes for
# one): the body is searched for such an escape before any string is looked at.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
_CONTENT_LENGTH = re.compile(rb"Content-Length:[ \t]*(\d+)[ \t]*\r?\n", re.IGNORECASE)
# Any header: a token, a colon, a value (RFC 9110 field syntax), on one line.
_HEADER = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\r\n]*\r?\n")
# What the start of a header line can be, before its newline has arrived.
_HEADER_PREFIX = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]*(?::[^\r\n]*)?\r?|\r")
_HEADER_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:")
_LENGTH_NAME = re.compile(rb"Content-Length[ \t]*:", re.IGNORECASE)
# What a too-long length takes of the next message: a header name, whole or cut short.
_HEADER_START = re.compile(rb"[A-Za-z][A-Za-z0-9-]*(?::|\Z)")
MAX_SKIP = MAX_MESSAGE + MAX_HEADER  # bytes skipped looking for a header before the stream is given up
EXIT_GRACE = 10.0  # seconds ``shutdown`` / ``exit`` wait for the requests in flight
MAX_HEAD = CHUNK  # bytes of a skipped body kept to read its request's id from
_CARRY = 64  # bytes kept between reads while looking for a header (one may straddle two)
# Bytes of input held in front of the loop for the look ahead for hovers: 3,000 small requests. Each
# time more arrives, what is held is copied once (bytes), so a larger hold costs a backlog of tiny
# messages more per message than it gains.
LOOK_AHEAD = 512 * 1024
HAND_OVER_EVERY = 0.002  # seconds between two hand-overs of the loop's writes to the writer thread


class TransportError(Exception):
    """The stream broke a limit and cannot go on; the message says which."""


class Reader(Protocol):
    def readexactly(self, n: int) -> Awaitable[bytes]:
        """``n`` bytes, fewer only at the end of the stream."""

    def readsome(self) -> Awaitable[bytes]:
        """What the stream holds now (at most ``CHUNK`` bytes), waiting only for the first byte;
        empty at the end of the stream."""


class Dispatch(Protocol):
    """What the loop needs of the protocol (``JaxProtocol``)."""

    def structure_message(self, data: dict[str, Any]) -> Any: ...

    def handle_message(self, message: Any) -> None: ...

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None: ...

    def notify(self, method: str, params: Any = None) -> None: ...


def widen_pipe(fd: int) -> None:
    """Let a pipe hold :data:`PIPE_BUFFER` bytes (Linux; 64 KiB by default) where the system allows.

    The loop reads what a pipe holds once per turn of its own, between slices of other work: a
    1.2 MB ``didOpen`` through a 64 KiB pipe was 20 turns, and a hover behind it waited 160-210 ms
    in the soak (issue 25). A writer thread's big answer, likewise, is fewer hand-overs of the GIL."""
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_BUFFER:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BUFFER)


class StdinReader:
    """stdin, read on the event loop's own thread when it is a pipe or a socket (what an editor
    gives a language server), else by blocking reads in the server's thread pool, each bounded.

    Reads in the pool cost a hand-over of the GIL each: the pool's thread, woken by the data, waits
    for the loop's thread to let go of it (up to the 5 ms switch interval while the loop works in
    slices), once for every 64 KiB of a pipe. A 10 MB ``didOpen`` was some 160 such waits, and
    every message behind it waited too: hovers 130-220 ms at the median and 0.8-1.3 s at worst
    while the soak's hostile files were opened (issue 25). On the loop's thread the same bytes are
    read between two slices with no hand-over. A regular file (``jaxlsp serve < msgs``) or a
    terminal keeps the pool: epoll refuses regular files, and a terminal left non-blocking would
    break the shell after the server exits."""

    def __init__(self, stdin: BinaryIO, executor: ThreadPoolExecutor | None) -> None:
        self.stdin = stdin
        self.executor = executor
        self._stream: PipeInput | None = None
        self._tried = False

    async def _on_loop(self) -> PipeInput | None:
        if not self._tried:
            self._tried = True
            try:
                mode = os.fstat(self.stdin.fileno()).st_mode
            except (OSError, ValueError, AttributeError):  # not a real descriptor (a test's BytesIO)
                return None
            if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                return None
            widen_pipe(self.stdin.fileno())
            stream = PipeInput()
            loop = asyncio.get_running_loop()
            try:
                await loop.connect_read_pipe(lambda: stream, self.stdin)
            except (OSError, ValueError):
                return None
            self._stream = stream
        return self._stream

    async def readexactly(self, n: int) -> bytes:
        stream = await self._on_loop()
        if stream is not None:
            return await stream.readexactly(n)
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.stdin.read, n)

    async def readsome(self) -> bytes:
        stream = await self._on_loop()
        if stream is not None:
            return await stream.readsome()
        # A buffered stream's read1 is one read of what is there; a raw stream's read is too.
        read1 = getattr(self.stdin, "read1", self.stdin.read)
        return await asyncio.get_running_loop().run_in_executor(self.executor, read1, CHUNK)

    def ready(self) -> bytes:
        """What stdin holds now, without waiting; empty when nothing is there or it cannot be told
        (a regular file or a terminal, read in the pool)."""
        return self._stream.ready() if self._stream is not None else b""


class PipeInput(asyncio.Protocol):
    """A pipe's bytes as the loop receives them, with what is buffered in view (:meth:`ready`): the
    look ahead for hovers (:mod:`jaxlsp.server.lookahead`) needs all of it, where an
    ``asyncio.StreamReader`` hands out at most what one read asks for. Reading pauses while more
    than twice :data:`PIPE_BUFFER` bytes wait, as a ``StreamReader`` of that limit does."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._wake()
        if not self._paused and len(self._buffer) > 2 * PIPE_BUFFER and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _taken(self, n: int) -> bytes:
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        if self._paused and len(self._buffer) <= PIPE_BUFFER and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return data

    def ready(self) -> bytes:
        return self._taken(len(self._buffer))

    async def readsome(self, n: int = CHUNK) -> bytes:
        while not self._buffer and not self._eof:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._taken(n)

    async def readexactly(self, n: int) -> bytes:
        """``n`` bytes, fewer only at the end of the stream."""
        parts = []
        while n > 0 and (chunk := await self.readsome(n)):
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)


class StreamReader:
    """An ``asyncio.StreamReader`` (TCP) with the same bounds."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self.reader.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial

    async def readsome(self) -> bytes:
        return await self.reader.read(CHUNK)


class ThreadedWriter:
    """The client's output stream, written by a thread of its own: the event loop never waits for
    a client that is slow to read (pygls' ``StdoutWriter`` writes and flushes in the loop, and a
    full pipe held it: 4.6 s of 25 s while 1,000 traces were answered, issue 25). Messages go out
    in the order they were written; :meth:`close` (``exit``) sends what is queued first.

    What the event loop's thread writes goes to the thread in pieces: at the end of the loop's turn,
    or, within :data:`HAND_OVER_EVERY` of the last hand-over, that much after it. Handing each
    message over woke the thread each time, and on a busy machine each wake-up could cost the loop
    its CPU (1,000 superseded traces, answered one per turn: 1,138 hand-overs, 0.37-0.8 ms each
    under cProfile, a third of what answering them cost the loop; issue 25). A lone answer (a
    hover) still goes at the end of its turn. Messages from other threads go straight to the queue.

    A hand-over the pipe has room for is written at once, on the loop's thread (:meth:`_write_now`),
    when nothing is queued before it: the writer thread, woken for it, had to win the GIL from a
    loop that takes it back after every ``select`` of its short turns, and waited up to 98 ms for
    it while the soak's cancel storm was answered (issue 25). The kernel says how much a pipe holds
    (``FIONREAD``) and how much it can (``F_GETPIPE_SZ``), so such a write never blocks."""

    def __init__(self, stream: BinaryIO, on_broken: Callable[[], None] | None = None) -> None:
        self.stream = stream
        self.on_broken = on_broken
        self.broken = False
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._fd, self._capacity = pipe_capacity(stream)
        self._writing = threading.Lock()  # held while bytes go to the stream (the thread, or a write now)
        self._count_lock = threading.Lock()
        self._queued = 0  # messages put in the queue and not yet written and flushed
        self._batch: list[bytes] = []  # written by the loop's thread in this turn of the loop
        self._batch_lock = threading.Lock()  # close() may run in another thread
        self._handed = 0.0  # when the last hand-over was (monotonic)
        self._thread = threading.Thread(target=self._run, name="jaxlsp-writer", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        if self.broken:
            return
        loop = asyncio._get_running_loop()  # None outside the loop's thread (the public getter raises)
        if loop is None:
            self._put(data)
            return
        with self._batch_lock:
            if not self._batch:
                wait = self._handed + HAND_OVER_EVERY - time.monotonic()
                if wait > 0:
                    loop.call_later(wait, self._hand_over)
                else:
                    loop.call_soon(self._hand_over)
            self._batch.append(data)

    def _hand_over(self) -> None:
        with self._batch_lock:
            batch, self._batch = self._batch, []
            self._handed = time.monotonic()
        if batch:
            data = batch[0] if len(batch) == 1 else b"".join(batch)
            if not self._write_now(data):
                self._put(data)

    def _put(self, data: bytes) -> None:
        with self._count_lock:
            self._queued += 1
        self._queue.put(data)

    def _write_now(self, data: bytes) -> bool:
        """Write ``data`` here and now if nothing is queued before it and the pipe has room for it
        all; False (nothing written) otherwise."""
        if self._fd is None or self.broken or not self._writing.acquire(blocking=False):
            return False
        try:
            with self._count_lock:
                if self._queued:
                    return False  # older messages are still on their way: they go first
            if self._capacity - pipe_held(self._fd) < len(data):
                return False
            written = 0
            try:
                while written < len(data):
                    written += os.write(self._fd, memoryview(data)[written:])
            except OSError:  # the client is gone: the thread finds it out and says so, once
                self._fd = None
                if written < len(data):
                    self._put(data[written:])
            return True
        finally:
            self._writing.release()

    def _run(self) -> None:
        while (data := self._queue.get()) is not None:
            written = 1
            try:
                with self._writing:
                    self.stream.write(data)
                    while not self._queue.empty():  # what came meanwhile, then one flush
                        more = self._queue.get()
                        if more is None:
                            self.stream.flush()
                            return
                        self.stream.write(more)
                        written += 1
                    self.stream.flush()
            except (OSError, ValueError):  # the client is gone (BrokenPipeError) or closed its end
                self.broken = True
                log.error("the connection to the client is lost: shutting down")
                if self.on_broken is not None:
                    self.on_broken()
                return
            with self._count_lock:
                self._queued -= written

    def close(self, timeout: float = EXIT_GRACE) -> None:
        """Send what is queued (for at most ``timeout`` seconds), then close the stream."""
        self._hand_over()  # what the loop wrote in its last turn, if that turn's end never came
        self._queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        with contextlib.suppress(OSError, ValueError):
            self.stream.close()


def pipe_capacity(stream: BinaryIO) -> tuple[int | None, int]:
    """``stream``'s descriptor and how many bytes its pipe holds at most (Linux); ``(None, 0)``
    for anything else (a file, a socket, a stream without a descriptor)."""
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        return None, 0
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None, 0
        return fd, fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except (OSError, ValueError, AttributeError):
        return None, 0


def pipe_held(fd: int) -> int:
    """How many bytes the pipe ``fd`` writes into holds, not yet read (``FIONREAD``)."""
    try:
        held: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 1 << 62  # unknown: as if full
    return held


class Frames:
    """Header lines and bodies over a :class:`Reader`, with a buffer in front of it: what was read
    past a header, what a resynchronisation read past the header it found, what a too-long length
    swallowed of the next message."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.pending = b""
        self.pos = 0  # where the unread part of ``pending`` starts (slicing per line was quadratic)
        # Set while every message read so far has been handed on and the next is awaited from the
        # client: work that a message coming right behind may cancel can wait for it (tracing.py).
        self.idle = asyncio.Event()
        self.lookahead = Lookahead()

    def push_back(self, data: bytes) -> None:
        self.pending, self.pos = data + self.pending[self.pos :], 0
        self.lookahead.reset()

    def overtaking(self) -> bytes | None:
        """The body of a hover buffered behind messages it may overtake (:mod:`.lookahead`), cut
        out of the buffer; None when there is none. Called between messages only."""
        ahead = self.lookahead
        if not ahead.blocked or ahead.scan < self.pos:
            self._fill()
        found = ahead.find(self.pending, self.pos)
        if found is None:
            return None
        frame, start, end = found
        body = self.pending[start:end]
        self.pending = self.pending[:frame] + self.pending[end:]
        return body

    def _fill(self) -> None:
        """Take in what the stream holds now, without waiting, up to :data:`LOOK_AHEAD` bytes."""
        ready = getattr(self.reader, "ready", None)
        if ready is None or len(self.pending) - self.pos >= LOOK_AHEAD:
            return
        data = ready()
        if data:
            self.lookahead.rebase(self.pos)
            self.pending, self.pos = self.pending[self.pos :] + data, 0

    def _take(self, n: int) -> bytes:
        data = self.pending[self.pos : self.pos + n]
        self.pos += len(data)
        if self.pos >= len(self.pending):
            self.pending, self.pos = b"", 0
            self.lookahead.reset()
        return data

    async def readline(self) -> bytes:
        """The next line, or its first ``MAX_HEADER + 1`` bytes, or (without waiting for more)
        bytes that cannot start a header line, such as a body sent with no header; empty at the end
        of the stream."""
        while True:
            held = len(self.pending) - self.pos
            end = self.pending.find(b"\n", self.pos, self.pos + MAX_HEADER + 1)
            if end >= 0 or held > MAX_HEADER:
                return self._take(end + 1 - self.pos if end >= 0 else MAX_HEADER + 1)
            if held and not _HEADER_PREFIX.fullmatch(self.pending, self.pos):
                return self._take(held)
            if not held:
                self.idle.set()
            try:
                chunk = await self.reader.readsome()
            finally:
                self.idle.clear()
            if not chunk:
                return self._take(held)
            self.lookahead.rebase(self.pos)
            self.pending, self.pos = self.pending[self.pos :] + chunk, 0

    async def readexactly(self, n: int) -> bytes:
        taken = self._take(n)
        if len(taken) == n:
            return taken
        return taken + await self.reader.readexactly(n - len(taken))

    async def readsome(self) -> bytes:
        if self.pending:
            return self._take(len(self.pending) - self.pos)
        return await self.reader.readsome()


async def read_headers(frames: Frames, protocol: Dispatch) -> int | None:
    """The next message's ``Content-Length``; None at the end of the stream. Broken framing is
    skipped up to the next ``Content-Length`` header (:func:`resynchronise`)."""
    length: int | None = None
    while True:
        line = await frames.readline()
        if not line:
            return None
        if not line.strip():
            if length is None:
                continue  # a stray blank line between messages
            return length
        if len(line) > MAX_HEADER:
            if _HEADER_NAME.match(line):
                raise TransportError(f"a header line is over {MAX_HEADER:,} bytes")
            length = await resynchronise(frames, protocol, line, "bytes that are not a header")
        elif (match := _CONTENT_LENGTH.fullmatch(line)) is not None:
            found = int(match.group(1))
            if length is not None and found != length:
                length = await resynchronise(frames, protocol, b"", "two different Content-Length headers")
            else:
                length = found
        elif _LENGTH_NAME.match(line):
            value = line.split(b":", 1)[1].strip()
            length = await resynchronise(
                frames, protocol, b"", f"a Content-Length that is not a byte count ({value[:40]!r})"
            )
        elif _HEADER.fullmatch(line):
            continue  # Content-Type, or a header of some extension: nothing we need
        else:
            length = await resynchronise(frames, protocol, line, "bytes that are not a header")
        if length is None:
            return None
        if length > MAX_MESSAGE:
            raise TransportError(f"a message of {length:,} bytes is over the {MAX_MESSAGE // (1024 * 1024)} MiB limit")


async def resynchronise(frames: Frames, protocol: Dispatch, start: bytes, why: str) -> int | None:
    """Skip what follows broken framing up to the next ``Content-Length`` header and return its
    length (the rest of that header block is read as usual); None when the stream ends first.

    ``start`` is what broke the framing when it is not a header at all (the tail of a body framed
    too short, a body with no header); it is empty when a header broke, and then the rest of its
    header block goes too. A body is read as it comes (it need not end with a newline), so the
    request whose id it holds is answered ``-32600`` at once, not when the next message arrives.
    A ``Content-Length: N`` line cannot occur inside a JSON body (a string holds no raw newline),
    so finding one anywhere is safe."""
    total = 0
    if not start:
        while True:
            line = await frames.readline()
            if not line:
                return _skipped(total, why, None, None)
            if not line.strip():
                total += len(line)
                break
            if len(line) > MAX_HEADER or not _HEADER.fullmatch(line):
                start = line  # no blank line: the body came straight after the header
                break
            total += len(line)
    head = b""  # the first bytes skipped after the header block: where a request's id would be
    answered: int | str | None = None
    window = start
    while True:
        match = _CONTENT_LENGTH.search(window)
        cut = match.start() if match is not None else max(len(window) - _CARRY, 0)
        total += cut
        if len(head) < MAX_HEAD:
            head += window[: min(cut, MAX_HEAD - len(head))]
        if answered is None and len(head) < MAX_HEAD:  # the bytes kept back may hold the id too
            answered = _answer(protocol, head if match is not None else head + window[cut:], why)
        if match is not None:
            frames.push_back(window[match.end() :])
            return _skipped(total, why, answered, int(match.group(1)))
        if total > MAX_SKIP:
            raise TransportError(f"no message header in the {total:,} bytes after {why}")
        chunk = await frames.readsome()
        if not chunk:
            return _skipped(total + len(window) - cut, why, answered, None)
        window = window[cut:] + chunk  # a header may straddle two reads


def _answer(protocol: Dispatch, head: bytes, why: str) -> int | str | None:
    """Answer the request whose framing broke, as soon as its id can be read from ``head``."""
    msg_id = top_level_id(head.lstrip())
    if msg_id is not None:
        protocol.send_error(msg_id, INVALID_REQUEST, f"the message's framing is broken ({why}): it was skipped")
    return msg_id


def _skipped(total: int, why: str, answered: int | str | None, found: int | None) -> int | None:
    log.warning(
        "skipped %s bytes after %s%s; %s",
        f"{total:,}",
        why,
        f" (answered request {repr(answered)[:60]})" if answered is not None else "",
        "reading on from the next header" if found is not None else "the stream ended",
    )
    return found


async def run(stop: threading.Event, reader: Reader, protocol: Dispatch) -> None:
    """Read, check and dispatch messages until the stream ends or ``stop`` is set."""
    with loopwatch.watching():
        await _run(stop, reader, protocol)


async def _run(stop: threading.Event, reader: Reader, protocol: Dispatch) -> None:
    frames = Frames(reader)
    if hasattr(protocol, "reader_idle"):
        protocol.reader_idle = frames.idle
    try:
        while not stop.is_set():
            ahead = frames.overtaking()
            if ahead is not None:
                handle_body(ahead, protocol)
                await asyncio.sleep(0)
                continue
            length = await read_headers(frames, protocol)
            if length is None:
                return
            body = await frames.readexactly(length) if length else b""
            if len(body) < length:
                return  # the stream ended inside a message
            if len(body) < 256 and _ends_session(body):
                frames.idle.set()  # what came before shutdown or exit is all handed on: let it run
                try:
                    await settle(protocol)
                finally:
                    frames.idle.clear()
            rest = handle_body(body, protocol)
            if rest:
                frames.push_back(rest)
            # Messages already read are handled without a read to wait on: let the tasks they
            # started run between them, as they did while every line was a read of its own.
            await asyncio.sleep(0)
    finally:
        frames.idle.set()  # no more input: nothing can supersede what still runs


def _ends_session(body: bytes) -> bool:
    """``shutdown`` or ``exit``: pygls' shutdown cancels the requests still running, and exit ends
    the process, so both wait for the requests ahead of them (:func:`settle`)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("method") in ("shutdown", "exit")


async def settle(protocol: Dispatch) -> None:
    """Before ``shutdown`` and ``exit``: let the requests being handled finish, for at most :data:`EXIT_GRACE`
    seconds. A client that sends ``exit`` right behind ``shutdown`` (not waiting for its answer)
    still gets the answer; with messages read ahead from one buffer, ``exit`` would otherwise
    end the process while ``shutdown`` still runs."""
    futures = getattr(protocol, "_request_futures", {})  # pygls' handlers in flight, by message id
    tasks = [f for f in list(futures.values()) if isinstance(f, asyncio.Task) and not f.done()]
    if tasks:
        await asyncio.wait(tasks, timeout=EXIT_GRACE)
    await asyncio.sleep(0)  # a finished handler's answer is sent from a callback already scheduled


def overlong(body: bytes) -> tuple[Any, bytes] | None:
    """A body that is one complete JSON value followed by the start of a header: the message and
    what its too-long ``Content-Length`` took of the next one; None for any other body."""
    try:
        text = body.decode("utf-8")
        value, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return None
    rest = body[len(text[:end].encode("utf-8")) :]
    if _HEADER_START.match(rest.lstrip()) is None:
        return None
    return value, rest


def handle_body(body: bytes, protocol: Dispatch) -> bytes:
    """Decode one message body and dispatch it, answering what cannot be dispatched; what belongs
    to the next message (a length too long, see :func:`overlong`) is returned to be read again."""
    rest = b""
    try:
        data = json.loads(body)
    except RecursionError:
        protocol.send_error(top_level_id(body), INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels")
        return rest
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        split = overlong(body)
        if split is None:
            protocol.send_error(top_level_id(body), PARSE_ERROR, f"the message is not JSON: {str(exc)[:200]}")
            return rest
        data, rest = split
        log.warning("a Content-Length was %s bytes too long: they are read again as the next header", f"{len(rest):,}")
    dispatch(data, protocol, _SURROGATE_ESCAPE.search(body) is not None)
    return rest


def dispatch(data: Any, protocol: Dispatch, escapes_surrogates: bool = False) -> None:
    """Check one decoded message and hand it to the protocol. ``escapes_surrogates``: the body
    holds a ``\\uD800``-``\\uDFFF`` escape, so a string may hold a lone surrogate (see
    :func:`lone_surrogates`)."""
    if not isinstance(data, dict):
        protocol.send_error(None, INVALID_REQUEST, f"a message must be a JSON object, got {type(data).__name__}")
        return
    msg_id = data.get("id")
    msg_id = msg_id if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) else None
    is_request = msg_id is not None and isinstance(data.get("method"), str)
    problem = oversized(data)
    if problem is not None:
        code, text = problem
        if is_request or code == INVALID_REQUEST:
            protocol.send_error(msg_id, code, text)
        if not is_request:
            method = str(data.get("method"))[:100]
            text = f"dropped {f'a {method} notification' if 'method' in data else 'a message'}: {text}"
            log.warning("%s", text)
            if "method" in data:
                show_warning(protocol, text)
        return
    if escapes_surrogates and not lone_surrogates(data, protocol, msg_id if is_request else None):
        return
    if data.get("method") == "$/cancelRequest" and "id" not in data and _cancel(data, protocol):
        return
    try:
        message = protocol.structure_message(data)
    except JsonRpcException as exc:
        if is_request:
            method = str(data["method"])[:100]
            protocol.send_error(msg_id, INVALID_PARAMS, f"{method}: params do not fit the method's type")
        else:
            log.warning("dropped a message that does not fit its type: %s", exc)
        return
    try:
        protocol.handle_message(message)
    except Exception:  # a handler's failure is answered by pygls; this only keeps the loop alive
        log.exception("unable to handle a message")


def _cancel(data: dict[str, Any], protocol: Dispatch) -> bool:
    """A ``$/cancelRequest`` with a well-formed id, handed to the protocol's ``cancel_request``
    without structuring it into a message (a storm is thousands of them, each hovers queue behind:
    cattrs and pygls' dispatch cost several times the cancel itself); False for anything else."""
    cancel = getattr(protocol, "cancel_request", None)
    params = data.get("params")
    target = params.get("id") if type(params) is dict else None
    if cancel is None or data.get("jsonrpc") != "2.0" or type(target) not in (int, str):
        return False
    cancel(target)
    return True


def oversized(message: dict[str, Any]) -> tuple[int, str] | None:
    """Why ``message`` is refused before it is structured, as an error code and a sentence naming
    the key path; None when it is within the bounds. Structuring a list costs per item what
    reading it costs per byte a hundred times over (lsprotocol's cattrs hooks), so lists and
    objects are bounded by their length (:data:`MAX_ITEMS`, :data:`LONG_LISTS`) and the whole
    message by how many values it holds (:data:`MAX_VALUES`), each read with ``len`` alone: the
    walk stops at the first container over a bound, and never visits a string's characters or a
    list of scalars' items."""
    method = message.get("method")
    long_lists = LONG_LISTS.get(method, {}) if isinstance(method, str) else {}
    values = 0
    # A key path is (parent's path, key), spelt out only for an error: formatting one per value
    # cost more than the rest of the walk.
    stack: list[tuple[Any, Any, int]] = [(message, None, 1)]
    while stack:
        item, path, level = stack.pop()
        if level > MAX_DEPTH:
            return INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels"
        if len(item) > MAX_ITEMS:
            where = key_path(path)
            most = long_lists.get(where, MAX_ITEMS)
            if len(item) > most:
                unit = "members" if isinstance(item, dict) else "items"
                return INVALID_PARAMS, f"{where or 'the message'}: too long ({len(item):,} {unit}; at most {most:,})"
        values += len(item)
        if values > MAX_VALUES:
            return INVALID_PARAMS, f"{key_path(path) or 'the message'}: the message holds over {MAX_VALUES:,} values"
        pairs = enumerate(item) if type(item) is list else item.items()
        deeper = level + 1
        if deeper > MAX_DEPTH:  # an empty child is as deep as a full one
            stack.extend((child, (path, key), deeper) for key, child in pairs if type(child) in _CONTAINERS)
        else:  # empty children hold nothing to check
            stack.extend((child, (path, key), deeper) for key, child in pairs if type(child) in _CONTAINERS and child)
    return None


_CONTAINERS = (dict, list)  # what json.loads makes of objects and arrays (exact types: faster)


def key_path(path: Any) -> str:
    """``params.context.diagnostics[3]`` for the linked path ``(((None, "params"), ...), 3)``."""
    keys = []
    while path is not None:
        path, key = path
        keys.append(f"[{key}]" if isinstance(key, int) else f".{str(key)[:60]}")
    # A key may hold what cannot be written as UTF-8: shown as its escape.
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", "".join(reversed(keys)).lstrip("."))


def lone_surrogates(message: dict[str, Any], protocol: Dispatch, msg_id: int | str | None) -> bool:
    """Whether ``message`` may be dispatched, with no string holding a lone surrogate (``"\\ud800"``
    is valid JSON but not Unicode text: a path or document holding one fails deep in a handler,
    with an internal error). A request (``msg_id``) is refused with ``-32602`` naming the key path;
    a notification (a document's text) keeps its strings with each lone surrogate replaced by
    U+FFFD, one UTF-16 unit for one, so positions the client sends later still fit, and the user is
    told (a log line and ``window/showMessage``)."""
    found: list[str] = []
    stack: list[tuple[Any, Any]] = [(message, None)]
    while stack:
        item, path = stack.pop()
        pairs = enumerate(item) if type(item) is list else item.items()
        for key, child in pairs:
            where = (path, key)
            if type(key) is str and _SURROGATE.search(key):
                if msg_id is not None:
                    return _refuse_surrogate(protocol, msg_id, f"{key_path(where)} (a key)")
                return _drop_surrogate(message, protocol, f"{key_path(where)} (a key)")
            if type(child) is str:
                if _SURROGATE.search(child):
                    if msg_id is not None:
                        return _refuse_surrogate(protocol, msg_id, key_path(where))
                    item[key] = _SURROGATE.sub("\ufffd", child)
                    found.append(key_path(where))
            elif type(child) in _CONTAINERS:
                stack.append((child, where))
    if found:
        text = (
            f"{str(message.get('method'))[:100]}: {', '.join(found[:3])}{' and more' if len(found) > 3 else ''} "
            "held lone surrogates (not Unicode text): each was replaced by U+FFFD"
        )
        log.warning("%s", text)
        show_warning(protocol, text)
    return True


def show_warning(protocol: Dispatch, text: str) -> None:
    """Tell the user (``window/showMessage``) what was done to a message of theirs."""
    protocol.notify(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(types.MessageType.Warning, f"jaxlsp: {text}"))


def _refuse_surrogate(protocol: Dispatch, msg_id: int | str, where: str) -> bool:
    protocol.send_error(msg_id, INVALID_PARAMS, f"{where}: holds a lone surrogate (not Unicode text)")
    return False


def _drop_surrogate(message: dict[str, Any], protocol: Dispatch, where: str) -> bool:
    text = f"dropped a {str(message.get('method'))[:100]} message: {where} holds a lone surrogate"
    log.warning("%s", text)
    show_warning(protocol, text)
    return False


def top_level_id(body: bytes) -> int | str | None:
    """The ``id`` member of the outermost object of a body that did not parse, when it can be read."""
    text = body[: MAX_HEADER * 8].decode("utf-8", errors="replace")  # an id comes early
    level = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            end = _string_end(text, i)
            if end < 0:
                return None
            if level == 1 and text[i:end] == '"id"':
                match = _ID_VALUE.match(text, end)
                if match is None or match.end() == len(text):
                    return None  # no id, or one that may go on past what was read
                raw = match.group(1)
                try:
                    value = json.loads(raw)
                except ValueError:
                    return None
                return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None
            i = end
            continue
        if c in "{[":
            level += 1
        elif c in "}]":
            level -= 1
        i += 1
    return None


_ID_VALUE = re.compile(r'\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal starting at ``start``, or -1 when it never closes."""
    i = start + 1
    while True:
        j = text.find('"', i)
        if j < 0:
            return -1
        backslashes = 0
        k = j - 1
        while k > start and text[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 0:
            return j + 1
        i = j + 1


def fatal(error: TransportError, exit_process: Callable[[int], Any] = sys.exit) -> None:
    """One log line, no traceback, exit status 1."""
    log.error("closing: %s", error)
    exit_process(1)
