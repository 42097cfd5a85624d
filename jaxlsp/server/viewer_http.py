"""The viewer's loopback HTTP bridge: serves the viewer page, its assets and graphs to a browser,
takes "go to source" clicks and pushes highlights as server-sent events (docs/viewer.md).

No pygls here: the language server passes callbacks for graph lookup, staleness and reveal. It runs
in the server's asyncio loop. Security: bound to 127.0.0.1 only, on a random port; every request
must carry the per-session token (``secrets.token_urlsafe(32)``, compared in constant time) as
the query parameter ``token`` and a ``Host`` of ``127.0.0.1:PORT`` or ``localhost:PORT`` (so a
DNS-rebinding page cannot reach it); no CORS headers; only known asset names are served;
responses are ``Cache-Control: no-store``.

Bounds, since anyone on the machine can connect without the token: at most
:data:`MAX_CONNECTIONS` connections are served at once (beyond, or when the process is within
its descriptor reserve, :func:`fd_headroom`, a new one is closed at once), a connection that has
not sent its request line and headers within :data:`HEAD_TIMEOUT` seconds is closed, and at most
:data:`MAX_PAGES` event streams stay open. 1,100 idle connections once took every descriptor of
the server, whose lenses then came back empty (docs/security.md).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hmac
import inspect
import json
import logging
import os
import resource
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlencode, urlsplit

from jaxlsp.viewer import asset

log = logging.getLogger(__name__)
T = TypeVar("T")

HOST = "127.0.0.1"
MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
READ_TIMEOUT = 10.0  # seconds for a request's body
HEAD_TIMEOUT = 5.0  # seconds from the connection to the end of its request line and headers
MAX_CONNECTIONS = 64  # connections being read or answered at once, event streams (MAX_PAGES) among them
MAX_PAGES = 32  # event streams (open pages) at once
FD_RESERVE = 128  # descriptors no bridge connection may take: the server's own work needs them
KEEPALIVE = 15.0  # seconds between SSE comments, which also notice a closed page
MAX_QUEUED = 256  # events waiting for one page
PAGE_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "connect-src 'self'; worker-src blob:; img-src data: blob:"
)
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


class BridgeError(Exception):
    """A callback's refusal, answered with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Callbacks:
    """What the bridge asks the language server (all run in the server's loop)."""

    # the canonical graph JSON of a trace; BridgeError(404) if unknown (the server makes it off its loop)
    graph: Callable[[str], bytes | Awaitable[bytes]]
    stale: Callable[[str], bool]  # whether a source of the trace changed since
    reveal: Callable[[str, str, int | None], Awaitable[dict[str, Any]]]  # -> {"location": ...}
    # costs by module, memory and precision of a trace (jaxlsp/costs' answer); BridgeError(404)
    analysis: Callable[[str], dict[str, Any] | Awaitable[dict[str, Any]]] | None = None
    # what changed from a base trace (None: the target's previous one); BridgeError(404)
    diff: Callable[[str, str | None], dict[str, Any] | Awaitable[dict[str, Any]]] | None = None


async def _answer(value: T | Awaitable[T]) -> T:
    """A callback's answer, awaited when it is a coroutine."""
    if inspect.isawaitable(value):
        return await value
    return value


def fd_headroom() -> int | None:
    """Descriptors this process may still open (None where it cannot tell: no ``/proc``)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        used = len(os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft - used


def raise_fd_limit(most: int = 65536) -> None:
    """Raise this process's soft limit on open descriptors toward its hard limit (at most
    ``most``): the usual soft limit of 1,024 is a few hundred idle sockets away from refusing the
    server's own files."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = most if hard == resource.RLIM_INFINITY else min(hard, most)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as exc:
        log.info("could not raise the open-file limit: %s", exc)


def _script_json(data: object) -> str:
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class Bridge:
    def __init__(
        self, callbacks: Callbacks, head_timeout: float = HEAD_TIMEOUT, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        self.callbacks = callbacks
        self.token = secrets.token_urlsafe(32)
        self.port = 0
        self.head_timeout = head_timeout
        self.max_connections = max_connections
        self.refused = 0  # connections closed unread: over the cap or within the descriptor reserve
        self._connections = 0
        self._server: asyncio.Server | None = None
        self._streams: set[asyncio.Queue[tuple[str, str] | None]] = set()

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._handle, HOST, 0, limit=MAX_HEAD)
        self.port = self._server.sockets[0].getsockname()[1]
        atexit.register(self._close_now)
        log.info("viewer bridge on http://%s:%d", HOST, self.port)

    def url(self, trace_id: str, node_id: str | None = None) -> str:
        """The page of a trace; with ``node_id`` the page selects and reveals that node."""
        query = {"token": self.token, "trace": trace_id, **({"node": node_id} if node_id else {})}
        return f"http://{HOST}:{self.port}/?{urlencode(query)}"

    def push(self, event: str, data: dict[str, Any]) -> None:
        """Send one server-sent event to every open page."""
        payload = (event, json.dumps(data, separators=(",", ":")))
        for queue in self._streams:
            if queue.qsize() < MAX_QUEUED:  # a page that stopped reading misses events, not memory
                queue.put_nowait(payload)

    @property
    def pages(self) -> int:
        return len(self._streams)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        for queue in self._streams:
            queue.put_nowait(None)
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2.0)
        atexit.unregister(self._close_now)

    def _close_now(self) -> None:
        # The process is exiting without shutdown: stop listening at least.
        if self._server is not None:
            self._server.close()

    # -- HTTP ----------------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headroom = fd_headroom()
        if self._connections >= self.max_connections or (headroom is not None and headroom < FD_RESERVE):
            self.refused += 1
            if self.refused in (1, 100, 10_000):  # said, but not once per connection of a flood
                log.warning(
                    "viewer bridge: %d connection(s) refused (%d open, %s descriptors left)",
                    self.refused,
                    self._connections,
                    headroom,
                )
            with contextlib.suppress(Exception):
                writer.transport.abort()  # unread: its descriptor goes back now
            return
        self._connections += 1
        try:
            await self._serve(reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, TimeoutError, ValueError):
            pass
        except Exception:  # a page must never take the server down
            log.exception("viewer bridge: request failed")
        finally:
            self._connections -= 1
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.head_timeout)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await self._send(writer, 400, {"error": "bad request line"})
            return
        method, target, _ = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        query = parse_qs(url.query)
        if headers.get("host") not in (f"{HOST}:{self.port}", f"localhost:{self.port}"):
            await self._send(writer, 403, {"error": "forbidden host"})
            return
        token = query.get("token", [""])[0]
        if not hmac.compare_digest(token.encode("utf-8", "replace"), self.token.encode()):
            await self._send(writer, 403, {"error": "missing or wrong token"})
            return
        path = url.path
        if method == "GET" and path == "/":
            await self._page(writer, query.get("trace", [""])[0], query.get("node", [""])[0])
        elif method == "GET" and path in ("/viewer.js", "/viewer.css"):
            name = path[1:]
            await self._send_bytes(writer, 200, asset(name), TYPES[name[name.rindex(".") :]])
        elif method == "GET" and path == "/graph":
            await self._graph(writer, query.get("trace", [""])[0])
        elif method == "GET" and path in ("/analysis", "/diff"):
            await self._derived(writer, path[1:], query.get("trace", [""])[0], query.get("base", [None])[0])
        elif method == "GET" and path == "/events":
            await self._events(writer)
        elif method == "POST" and path == "/reveal":
            await self._reveal(reader, writer, headers)
        elif path in ("/", "/viewer.js", "/viewer.css", "/graph", "/analysis", "/diff", "/events", "/reveal"):
            await self._send(writer, 405, {"error": f"{method} not allowed on {path}"})
        else:
            await self._send(writer, 404, {"error": f"no such path: {path}"})

    async def _page(self, writer: asyncio.StreamWriter, trace_id: str, node_id: str = "") -> None:
        settings = {"mode": "http", "token": self.token, "traceId": trace_id}
        if node_id:
            settings["nodeId"] = node_id
        config = _script_json(settings)
        page = asset("index.html").decode("utf-8").replace("$TOKEN", self.token).replace("$CONFIG", config)
        await self._send_bytes(
            writer, 200, page.encode("utf-8"), "text/html; charset=utf-8", {"Content-Security-Policy": PAGE_CSP}
        )

    async def _graph(self, writer: asyncio.StreamWriter, trace_id: str) -> None:
        try:
            body = await _answer(self.callbacks.graph(trace_id))
            stale = self.callbacks.stale(trace_id)
        except BridgeError as e:
            await self._send(writer, e.status, {"error": str(e)})
            return
        await self._send_bytes(
            writer, 200, body, "application/json; charset=utf-8", {"X-Jaxlsp-Stale": "1" if stale else "0"}
        )

    async def _derived(self, writer: asyncio.StreamWriter, what: str, trace_id: str, base: str | None) -> None:
        """``/analysis`` and ``/diff``: what the server derives from a trace, as JSON."""
        try:
            if what == "analysis" and self.callbacks.analysis is not None:
                data = await _answer(self.callbacks.analysis(trace_id))
            elif what == "diff" and self.callbacks.diff is not None:
                data = await _answer(self.callbacks.diff(trace_id, base))
            else:
                raise BridgeError(404, f"no {what} here")
        except BridgeError as e:
            await self._send(writer, e.status, {"error": str(e)})
            return
        await self._send(writer, 200, data)

    async def _reveal(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]
    ) -> None:
        length = headers.get("content-length", "")
        if not length.isdigit() or int(length) > MAX_BODY:
            await self._send(writer, 400, {"error": f"expected a JSON body of at most {MAX_BODY} bytes"})
            return
        raw = await asyncio.wait_for(reader.readexactly(int(length)), READ_TIMEOUT)
        try:
            data = json.loads(raw)
        except ValueError as e:
            await self._send(writer, 400, {"error": f"body: not JSON ({e})"})
            return
        trace_id = data.get("traceId") if isinstance(data, dict) else None
        node_id = data.get("nodeId") if isinstance(data, dict) else None
        frame = data.get("frame") if isinstance(data, dict) else None
        if not isinstance(trace_id, str) or not isinstance(node_id, str):
            await self._send(writer, 400, {"error": "body: expected {traceId: string, nodeId: string, frame?: number}"})
            return
        if frame is not None and (not isinstance(frame, int) or isinstance(frame, bool) or frame < 0):
            await self._send(writer, 400, {"error": f"body.frame: expected a frame index, got {frame!r}"})
            return
        try:
            result = await self.callbacks.reveal(trace_id, node_id, frame)
        except BridgeError as e:
            await self._send(writer, e.status, {"error": str(e)})
            return
        await self._send(writer, 200, result)

    async def _events(self, writer: asyncio.StreamWriter) -> None:
        if len(self._streams) >= MAX_PAGES:
            await self._send(writer, 503, {"error": f"too many open pages (at most {MAX_PAGES}): close some"})
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
            b"X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n: jaxlsp\n\n"
        )
        await writer.drain()
        queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        self._streams.add(queue)
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), KEEPALIVE)
                except TimeoutError:
                    writer.write(b": keepalive\n\n")
                    await writer.drain()
                    continue
                if item is None:
                    return
                event, data = item
                writer.write(f"event: {event}\ndata: {data}\n\n".encode())
                await writer.drain()
        finally:
            self._streams.discard(queue)

    async def _send(self, writer: asyncio.StreamWriter, status: int, data: dict[str, Any]) -> None:
        body = json.dumps(data, separators=(",", ":")).encode("utf-8")
        await self._send_bytes(writer, status, body, "application/json; charset=utf-8")

    async def _send_bytes(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        content_type: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        reason = {
            200: "OK",
            400: "Bad Request",
            403: "Forbidden",
            404: "Not Found",
            405: "Method Not Allowed",
            503: "Service Unavailable",
        }
        head = [
            f"HTTP/1.1 {status} {reason.get(status, 'Error')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-store",
            "X-Content-Type-Options: nosniff",
            "Referrer-Policy: no-referrer",
            "Connection: close",
        ]
        head += [f"{k}: {v}" for k, v in (extra or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
