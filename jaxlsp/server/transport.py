"""The message loop under the server: pygls' stdio/TCP reader, with the limits a client can abuse.

pygls 2.1's ``run_async`` reads a ``Content-Length`` of any size (a header claiming a petabyte
raises MemoryError and the server dies with a traceback), leaves a request unanswered when its
body is not JSON, nests too deeply for ``json.loads``, or does not fit its params type, and hands
every nested object to the protocol's ``object_hook`` (so a ``jsonrpc`` key deep inside params is
taken for a message). This loop keeps pygls' framing and dispatch and adds:

- a 64 MiB cap on a message and 8 KiB on a header line: over it, one log line and exit 1 (the
  stream cannot be resynchronised, and reading the body would hold it all in memory);
- ``-32700`` for a body that is not JSON, with the request's id when one can be read from it;
- ``-32600`` for a message nested deeper than :data:`MAX_DEPTH`, ``-32602`` for a request whose
  params do not fit the method's type, both with the request's id;
- only the top-level object is structured into a message.

It is a local guard for what belongs upstream in pygls (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Protocol

from pygls.exceptions import JsonRpcException

log = logging.getLogger(__name__)

MAX_MESSAGE = 64 * 1024 * 1024  # bytes of one message body
MAX_HEADER = 8 * 1024  # bytes of one header line
MAX_DEPTH = 64  # nesting of objects and arrays in one message (LSP's own are under 12)
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
_CONTENT_LENGTH = re.compile(rb"Content-Length:\s*(\d+)\s*", re.IGNORECASE)


class TransportError(Exception):
    """The stream broke a limit and cannot go on; the message says which."""


class Reader(Protocol):
    def readline(self) -> Awaitable[bytes]: ...

    def readexactly(self, n: int) -> Awaitable[bytes]: ...


class Dispatch(Protocol):
    """What the loop needs of the protocol (``JaxProtocol``)."""

    def structure_message(self, data: dict[str, Any]) -> Any: ...

    def handle_message(self, message: Any) -> None: ...

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None: ...


class StdinReader:
    """Blocking reads of stdin in the server's thread pool, each bounded."""

    def __init__(self, stdin: BinaryIO, executor: ThreadPoolExecutor | None) -> None:
        self.stdin = stdin
        self.executor = executor

    def readline(self) -> Awaitable[bytes]:
        return asyncio.get_running_loop().run_in_executor(self.executor, self.stdin.readline, MAX_HEADER + 1)

    def readexactly(self, n: int) -> Awaitable[bytes]:
        return asyncio.get_running_loop().run_in_executor(self.executor, self.stdin.read, n)


class StreamReader:
    """An ``asyncio.StreamReader`` (TCP) with the same bounds."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def readline(self) -> bytes:
        try:
            return await self.reader.readline()
        except (ValueError, asyncio.LimitOverrunError):
            raise TransportError(f"a header line is over {MAX_HEADER:,} bytes") from None

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self.reader.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial


async def read_headers(reader: Reader) -> int | None:
    """The next message's ``Content-Length``; None at the end of the stream."""
    length: int | None = None
    while True:
        line = await reader.readline()
        if not line:
            return None
        if len(line) > MAX_HEADER:
            raise TransportError(f"a header line is over {MAX_HEADER:,} bytes")
        if not line.strip():
            if length is None:
                continue  # a stray blank line between messages
            return length
        match = _CONTENT_LENGTH.fullmatch(line)
        if match is not None:
            length = int(match.group(1))
            if length > MAX_MESSAGE:
                raise TransportError(
                    f"a message of {length:,} bytes is over the {MAX_MESSAGE // (1024 * 1024)} MiB limit"
                )


async def run(stop: threading.Event, reader: Reader, protocol: Dispatch) -> None:
    """Read, check and dispatch messages until the stream ends or ``stop`` is set."""
    while not stop.is_set():
        length = await read_headers(reader)
        if length is None:
            return
        body = await reader.readexactly(length) if length else b""
        if len(body) < length:
            return  # the stream ended inside a message
        handle_body(body, protocol)


def handle_body(body: bytes, protocol: Dispatch) -> None:
    """Decode one message body and dispatch it, answering what cannot be dispatched."""
    try:
        data = json.loads(body)
    except RecursionError:
        protocol.send_error(top_level_id(body), INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels")
        return
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        protocol.send_error(top_level_id(body), PARSE_ERROR, f"the message is not JSON: {str(exc)[:200]}")
        return
    if not isinstance(data, dict):
        protocol.send_error(None, INVALID_REQUEST, f"a message must be a JSON object, got {type(data).__name__}")
        return
    msg_id = data.get("id")
    msg_id = msg_id if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) else None
    is_request = msg_id is not None and isinstance(data.get("method"), str)
    if depth(data) > MAX_DEPTH:
        protocol.send_error(msg_id, INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels")
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


def depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level  # enough to refuse: no need to walk the rest
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


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
                if match is None:
                    return None
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
