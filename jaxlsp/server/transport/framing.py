"""Messages out of the stream: ``Content-Length`` headers and bodies over a :class:`Reader`
(:class:`Frames`), with the limits that end the stream (:class:`TransportError`) and the
resynchronisation after broken framing (:func:`resynchronise`)."""

from __future__ import annotations

import asyncio
import logging
import re

from jaxlsp.server.lookahead import Lookahead
from jaxlsp.server.transport.messages import INVALID_REQUEST, Dispatch, top_level_id
from jaxlsp.server.transport.streams import CHUNK, Reader

log = logging.getLogger(__package__)  # one logger for the transport, as before it was a package

MAX_MESSAGE = 64 * 1024 * 1024  # bytes of one message body
MAX_HEADER = 8 * 1024  # bytes of one header line
_CONTENT_LENGTH = re.compile(rb"Content-Length:[ \t]*(\d+)[ \t]*\r?\n", re.IGNORECASE)
# Any header: a token, a colon, a value (RFC 9110 field syntax), on one line.
_HEADER = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\r\n]*\r?\n")
# What the start of a header line can be, before its newline has arrived.
_HEADER_PREFIX = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]*(?::[^\r\n]*)?\r?|\r")
_HEADER_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:")
_LENGTH_NAME = re.compile(rb"Content-Length[ \t]*:", re.IGNORECASE)
MAX_SKIP = MAX_MESSAGE + MAX_HEADER  # bytes skipped looking for a header before the stream is given up
MAX_HEAD = CHUNK  # bytes of a skipped body kept to read its request's id from
_CARRY = 64  # bytes kept between reads while looking for a header (one may straddle two)
# Bytes of input held in front of the loop for the look ahead for hovers: 3,000 small requests. Each
# time more arrives, what is held is copied once (bytes), so a larger hold costs a backlog of tiny
# messages more per message than it gains.
LOOK_AHEAD = 512 * 1024


class TransportError(Exception):
    """The stream broke a limit and cannot go on; the message says which."""


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
        """The body of a hover buffered behind messages it may overtake (:mod:`jaxlsp.server.lookahead`), cut
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
