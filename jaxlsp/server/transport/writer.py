"""What the message loop writes to: the client's output stream, written by a thread of its own
(:class:`ThreadedWriter`) so that the event loop never waits for a client slow to read."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import queue
import stat
import struct
import termios
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

log = logging.getLogger(__package__)  # one logger for the transport, as before it was a package

# Seconds the end of a session waits: for the requests in flight (``shutdown`` and ``exit``:
# loop.settle), and for what is queued to go out (ThreadedWriter.close).
EXIT_GRACE = 10.0
HAND_OVER_EVERY = 0.002  # seconds between two hand-overs of the loop's writes to the writer thread


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
