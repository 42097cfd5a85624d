"""What the message loop reads from, behind one :class:`Reader` interface: stdin (a pipe or a
socket read on the event loop's own thread, anything else in the thread pool) or a TCP stream."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO, Protocol

CHUNK = 64 * 1024  # bytes asked of the stream in one read
PIPE_BUFFER = 1024 * 1024  # bytes of stdin a pipe read on the loop may hold before it pauses


class Reader(Protocol):
    def readexactly(self, n: int) -> Awaitable[bytes]:
        """``n`` bytes, fewer only at the end of the stream."""

    def readsome(self) -> Awaitable[bytes]:
        """What the stream holds now (at most ``CHUNK`` bytes), waiting only for the first byte;
        empty at the end of the stream."""


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
