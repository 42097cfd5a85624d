"""The graph methods: ``jaxlsp/graph`` (a page of one level of a trace) and ``jaxlsp/node`` (one
node with its values and source frames)."""

from __future__ import annotations

import contextlib
from typing import Any, cast

from pygls.exceptions import JsonRpcException

from jaxlsp.graph.store import Trace
from jaxlsp.offloop import off_loop
from jaxlsp.server import wire
from jaxlsp.server.convert import range_json
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, invalid, known_trace, parse, shown

MAX_PAGE = 5000


class Graphs:
    def __init__(self, ls: Host) -> None:
        self.ls = ls

    def register(self, server: Host) -> None:
        @server.feature(wire.GRAPH)
        async def graph(ls: Host, params: Any) -> wire.GraphPage:
            return await self.page(parse(params, wire.GraphParams))

        @server.feature(wire.NODE)
        def node(ls: Host, params: Any) -> wire.NodeDetail:
            return self.node(parse(params, wire.NodeParams))

    async def page(self, data: wire.GraphParams) -> wire.GraphPage:
        cursor = data.get("cursor")
        limit = data.get("limit", 200)
        if not 1 <= limit <= MAX_PAGE:
            raise invalid(f"params.limit: expected an integer from 1 to {MAX_PAGE}, got {shown(limit)}")
        store = self.ls.session.graphs
        trace = store.get(data["traceId"])
        if trace is not None and not trace.has_level(data.get("group")):
            # A level's first page orders the whole level (a 60,000-equation graph's top level:
            # its entries, a few bytes each): done off the loop, then each page makes its items.
            with contextlib.suppress(KeyError):  # an unknown group: said below
                await off_loop(trace.level_entries, data.get("group"))
        try:
            page = store.page(data["traceId"], data.get("group"), cursor, limit)
        except KeyError as exc:
            raise JsonRpcException(f"unknown trace or group: {shown(exc.args[0])}", code=REQUEST_FAILED) from None
        except ValueError:
            raise invalid(f"params.cursor: not a cursor of this trace: {shown(cursor)}") from None
        return cast(wire.GraphPage, page)  # GraphStore.page builds this shape (jaxlsp.graph has no wire types)

    def node(self, data: wire.NodeParams) -> wire.NodeDetail:
        trace_id, node_id = data["traceId"], data["nodeId"]
        stored = known_trace(self.ls.session.graphs, trace_id)
        found = stored.node(node_id)
        if found is None:
            raise JsonRpcException(f"unknown node {shown(node_id)} in trace {trace_id}", code=REQUEST_FAILED)
        return {
            "id": found.id,
            "kind": "node",
            "primitive": found.primitive,
            "params": found.params,
            "inputs": [cast(wire.ValueRef, stored.value_json(v)) for v in found.inputs],
            "outputs": [cast(wire.ValueRef, stored.value_json(v)) for v in found.outputs],
            "scope": found.scope,
            "group": found.group,
            "transforms": list(found.transforms),
            "frames": [self.location(f, stored) for f in found.frames],
        }

    def location(self, frame: Any, trace: Trace) -> wire.Location:
        # graph paths are relative; a notebook's cells are named by their documents when traced
        uri, rng = self.ls.frame_location(frame, trace.frame_path(frame), trace.meta.get("cellUris"))
        return {"uri": uri, "range": range_json(rng)}
