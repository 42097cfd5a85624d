"""The message loop: read a message (:mod:`.framing`), check and dispatch it (:mod:`.messages`),
until the stream ends; what ``shutdown`` and ``exit`` wait for, and how a broken stream ends the
server (:func:`fatal`)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from jaxlsp.server import loopwatch
from jaxlsp.server.transport.framing import Frames, TransportError, read_headers
from jaxlsp.server.transport.messages import Dispatch, handle_body
from jaxlsp.server.transport.streams import Reader
from jaxlsp.server.transport.writer import EXIT_GRACE

log = logging.getLogger(__package__)  # one logger for the transport, as before it was a package


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


def fatal(error: TransportError, exit_process: Callable[[int], Any] = sys.exit) -> None:
    """One log line, no traceback, exit status 1."""
    log.error("closing: %s", error)
    exit_process(1)
