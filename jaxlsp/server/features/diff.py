"""``jaxlsp/diff``: what changed between two graphs (``jaxlsp.graph.diff``), each a kept trace or
a graph file; by default a trace against the previous trace of the same target."""

from __future__ import annotations

from typing import Any, cast

from pygls.exceptions import JsonRpcException

from jaxlsp.graph import io
from jaxlsp.graph.diff import diff
from jaxlsp.graph.model import Graph
from jaxlsp.server import wire
from jaxlsp.server.app import JaxServer
from jaxlsp.server.params import REQUEST_FAILED, file_path, invalid, parse, shown

MAX_LISTED = 10_000


class Diff:
    def __init__(self, ls: JaxServer) -> None:
        self.ls = ls

    def register(self, server: JaxServer) -> None:
        @server.feature(wire.DIFF)
        def graph_diff(ls: JaxServer, params: Any) -> wire.DiffResult:
            return self.diff(parse(params, wire.DiffParams))

    def diff(self, data: wire.DiffParams) -> wire.DiffResult:
        limit = data.get("limit", 1000)
        if not 1 <= limit <= MAX_LISTED:
            raise invalid(f"params.limit: expected an integer from 1 to {MAX_LISTED}, got {shown(limit)}")
        if ("traceId" in data) == ("uri" in data):
            raise invalid("params: give the newer graph as exactly one of traceId and uri")
        if "base" in data and "baseUri" in data:
            raise invalid("params: give the older graph as at most one of base and baseUri")
        store = self.ls.session.graphs
        trace_id = data.get("traceId")
        if trace_id is not None:
            newer = self._trace(trace_id, "params.traceId").graph
        else:
            newer = self._file(data["uri"], "params.uri")
        if "base" in data:
            older, base = self._trace(data["base"], "params.base").graph, data["base"]
        elif "baseUri" in data:
            older, base = self._file(data["baseUri"], "params.baseUri"), data["baseUri"]
        else:
            trace = store.get(trace_id) if trace_id is not None else None
            previous = store.previous(trace) if trace is not None else None
            if previous is None:
                raise JsonRpcException(
                    "no earlier trace of this target is kept to compare with: give base or baseUri",
                    code=REQUEST_FAILED,
                )
            older, base = previous.graph, previous.id
        found = diff(older, newer).json(limit)
        found["traceId"] = trace_id
        found["base"] = base
        return cast(wire.DiffResult, found)  # GraphDiff.json builds this shape

    def _trace(self, trace_id: str, where: str) -> Any:
        trace = self.ls.session.graphs.get(trace_id)
        if trace is None:
            raise JsonRpcException(f"{where}: unknown trace {shown(trace_id)}", code=REQUEST_FAILED)
        return trace

    def _file(self, uri: str, where: str) -> Graph:
        path = file_path(uri, where)
        try:
            return io.read(path)
        except (OSError, ValueError) as exc:
            message = f"{where}: cannot read {path}: {shown(str(exc), 300)}"
            raise JsonRpcException(message, code=REQUEST_FAILED) from None
