"""The graph viewer in the browser: ``jaxlsp/openGraph`` (starts the loopback bridge once and
opens the page) and ``jaxlsp/cursorMoved`` (the editor's cursor highlights nodes in open pages).

The bridge (``jaxlsp.server.viewer_http``) holds no server state: it calls back here for graphs,
staleness and "go to source", which goes through ``jaxlsp/revealSource``'s code.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.graph.diff import diff_packed
from jaxlsp.graph.store import NodeSeq, Trace
from jaxlsp.offloop import off_loop
from jaxlsp.server import wire
from jaxlsp.server.features.navigation import Navigation, document_line
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, as_dict, invalid, parse
from jaxlsp.server.viewer_http import Bridge, BridgeError, Callbacks

GRAPH_CACHE = 4  # serialized graphs kept for pages that reload
STALE_DELAY = 0.3  # seconds after the last edit before pages hear whether their graph is stale


class Viewer:
    """The bridge (started on the first ``jaxlsp/openGraph``) and what open pages were told."""

    def __init__(self, ls: Host, navigation: Navigation) -> None:
        self.ls = ls
        self.navigation = navigation
        self.bridge: Bridge | None = None
        self._json: OrderedDict[str, bytes] = OrderedDict()
        self._served: dict[str, tuple[str, str]] = {}  # trace id -> (uri, name) of pages' graphs
        self._stale: dict[str, bool] = {}
        self._highlighted: str | None = None
        self._stale_timer: asyncio.TimerHandle | None = None

    def register(self, server: Host) -> None:
        server.session.graphs.listeners.append(self.new_trace)
        server.session.graphs.update_listeners.append(self.updated)
        server.edit_listeners.append(self.edited)
        server.on_shutdown.append(self.stop)

        @server.feature(wire.OPEN_GRAPH)
        async def open_graph(ls: Host, params: Any) -> wire.OpenGraphResult:
            return await self.open(parse(params, wire.OpenGraphParams))

        @server.command(wire.OPEN_GRAPH_COMMAND)
        async def open_graph_command(ls: Host, *args: Any) -> wire.OpenGraphResult:
            """The "Open graph" lens: the same as ``jaxlsp/openGraph``."""
            if len(args) != 1:
                raise invalid(f"{wire.OPEN_GRAPH_COMMAND}: expected one argument {{traceId}}, got {len(args)}")
            return await self.open(parse(as_dict(args[0]), wire.OpenGraphArguments, "arguments[0]"))

        @server.feature(wire.CURSOR_MOVED)
        def cursor_moved(ls: Host, params: Any) -> None:
            try:
                uri, line = document_line(ls, parse(params, wire.CursorMovedParams))
            except JsonRpcException:
                return  # a notification has no answer to carry the error; nothing to highlight
            found = self.navigation.at(uri, line)
            if found is None:
                self.highlight(None)
            else:
                self.highlight(found[0].id, found[1])

    async def open(self, data: wire.OpenGraphParams) -> wire.OpenGraphResult:
        """Serve the trace on the loopback bridge and ask the client to open it (at ``nodeId``)."""
        trace = self.navigation.find(data["traceId"])
        node_id = data.get("nodeId")
        if node_id is not None and trace.node(node_id) is None:
            raise JsonRpcException(f"unknown node {node_id!r} in trace {trace.id}", code=REQUEST_FAILED)
        url = await self.url(trace, node_id)
        self.ls.show_document(types.ShowDocumentParams(uri=url, external=True))
        return {"url": url}

    async def url(self, trace: Trace, node_id: str | None = None) -> str:
        if self.bridge is None:
            callbacks = Callbacks(
                graph=self._graph, stale=self._is_stale, reveal=self._reveal, analysis=self._analysis, diff=self._diff
            )
            self.bridge = Bridge(callbacks)
        await self.bridge.start()
        return self.bridge.url(trace.id, node_id)

    def updated(self, trace: Trace) -> None:
        """A kept trace gained statistics (jaxlsp/values): pages load its new JSON."""
        self._json.pop(trace.id, None)

    async def stop(self) -> None:
        if self.bridge is not None:
            await self.bridge.stop()

    # -- bridge callbacks ----------------------------------------------------------------------------
    def _find(self, trace_id: str) -> Trace:
        trace = self.ls.session.graphs.get(trace_id)
        if trace is None:
            raise BridgeError(404, f"unknown trace: {trace_id} (traces are kept while the server runs)")
        return trace

    # Serialising, analysing and diffing a graph run off the loop (jaxlsp/offloop.py): a
    # 60,000-equation graph's JSON is 27 MB, seconds of work the editor's requests must not wait on.
    async def _graph(self, trace_id: str) -> bytes:
        trace = self._find(trace_id)
        body = self._json.get(trace_id)
        if body is None:
            body = await off_loop(_graph_bytes, trace)
            self._json[trace_id] = body
            while len(self._json) > GRAPH_CACHE:
                self._json.popitem(last=False)
        self._served[trace_id] = (str(trace.meta.get("uri")), str(trace.meta.get("name")))
        return body

    async def _analysis(self, trace_id: str) -> dict[str, Any]:
        return await off_loop(self._find(trace_id).analysis)

    async def _diff(self, trace_id: str, base: str | None) -> dict[str, Any]:
        trace = self._find(trace_id)
        store = self.ls.session.graphs
        if base is None:
            previous = store.previous(trace)
            if previous is None:
                raise BridgeError(404, "no earlier trace of this target is kept to compare with")
            found = await off_loop(lambda: trace.changes_since(previous).json())
            return {**found, "traceId": trace.id, "base": previous.id}
        older = self._find(base)
        return {
            **await off_loop(lambda: diff_packed(older.packed, trace.packed).json()),
            "traceId": trace.id,
            "base": base,
        }

    def _is_stale(self, trace_id: str) -> bool:
        trace = self._find(trace_id)
        stale = bool(trace.stale_sources(lambda p: self.ls.session.index.text(Path(p))))
        self._stale[trace_id] = stale
        return stale

    async def _reveal(self, trace_id: str, node_id: str, frame: int | None) -> dict[str, Any]:
        data: wire.RevealSourceParams = {"traceId": trace_id, "nodeId": node_id}
        if frame is not None:
            data["frame"] = frame
        try:
            return dict(self.navigation.reveal(data))
        except JsonRpcException as e:
            raise BridgeError(404, e.message) from e

    # -- pushes ------------------------------------------------------------------------------------
    def highlight(self, trace_id: str | None, nodes: NodeSeq | None = None) -> None:
        """The nodes at the editor's cursor, innermost first, to every open page. Their ids are
        read only when a page is open: a loop's line holds every equation of the graph, and making
        60,000 nodes to read their ids held each hover 100 ms (loop watchdog, issue 25)."""
        bridge = self.bridge
        if bridge is None or not bridge.pages:
            return
        node_ids = nodes.ids if nodes is not None and trace_id is not None else []
        if trace_id is None:  # nothing at the cursor: clear the last highlight
            if self._highlighted is None:
                return
            trace_id = self._highlighted
        self._highlighted = trace_id if node_ids else None
        bridge.push("highlight", {"traceId": trace_id, "nodeIds": node_ids})
        self._push_staleness()

    def edited(self, path: Path) -> None:
        """A file's text changed: pages showing a graph it contributed to hear whether that graph
        is stale now, once the typing pauses (keystrokes come in bursts)."""
        if self.bridge is None or not self.bridge.pages:
            return
        key = str(path.resolve())
        if not any(
            (trace := self.ls.session.graphs.get(t)) is not None and trace.has_source(key) for t in self._served
        ):
            return
        if self._stale_timer is not None:
            self._stale_timer.cancel()
        self._stale_timer = asyncio.get_running_loop().call_later(STALE_DELAY, self._push_staleness)

    def _push_staleness(self) -> None:
        # Checked after edits and when the cursor moves, only for graphs pages show.
        self._stale_timer = None
        if self.bridge is None:
            return
        for trace_id in list(self._served):
            if self.ls.session.graphs.get(trace_id) is None:
                del self._served[trace_id]
                continue
            before = self._stale.get(trace_id)
            if self._is_stale(trace_id) != before:
                self.bridge.push("stale", {"traceId": trace_id, "stale": self._stale[trace_id]})

    def new_trace(self, trace: Trace) -> None:
        """A trace finished: pages showing an older trace of the same target can load it."""
        if self.bridge is None or not self.bridge.pages:
            return
        target = (str(trace.meta.get("uri")), str(trace.meta.get("name")))
        for old, served in list(self._served.items()):
            if served == target and old != trace.id:
                self.bridge.push("trace", {"traceId": trace.id, "replaces": old})


def _graph_bytes(trace: Trace) -> bytes:
    """The graph JSON the page loads, in the compact form (version 2, docs/graph-format.md) the
    trace is kept in, a column at a time: the viewer expands the rows itself (a 200,000-equation
    graph is 9 MB this way, 230 MB expanded)."""
    return b"".join(piece.encode("utf-8") for piece in trace.packed.iter_compact())
