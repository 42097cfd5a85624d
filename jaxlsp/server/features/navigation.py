"""From graph to source and back: ``jaxlsp/nodesAt`` (the nodes a source line produced) and
``jaxlsp/revealSource`` (a node's frame, shown in the editor; also the viewer's clicks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.graph.store import Trace
from jaxlsp.server import wire
from jaxlsp.server.app import JaxServer
from jaxlsp.server.convert import range_json
from jaxlsp.server.params import file_path, invalid, parse, shown

REQUEST_FAILED = -32803


def document_line(data: wire.NodesAtParams | wire.CursorMovedParams) -> tuple[Path, int]:
    """The file and 0-based line a ``{textDocument, position}`` param points at."""
    position = data["position"]
    if position["line"] < 0 or position["character"] < 0:
        raise invalid(f"params.position: expected non-negative integers, got {shown(position)}")
    return file_path(data["textDocument"]["uri"], "params.textDocument.uri"), position["line"]


class Navigation:
    def __init__(self, ls: JaxServer) -> None:
        self.ls = ls

    def register(self, server: JaxServer) -> None:
        @server.feature(wire.NODES_AT)
        def nodes_at(ls: JaxServer, params: Any) -> wire.NodesAtResult:
            path, line = document_line(parse(params, wire.NodesAtParams))
            found = self.at(path, line)
            return (
                {"traceId": found[0].id, "nodeIds": [n.id for n in found[1]]}
                if found
                else {
                    "traceId": None,
                    "nodeIds": [],
                }
            )

        @server.feature(wire.REVEAL_SOURCE)
        async def reveal_source(ls: JaxServer, params: Any) -> wire.RevealSourceResult:
            return self.reveal(parse(params, wire.RevealSourceParams))

    def find(self, trace_id: str) -> Trace:
        found = self.ls.session.graphs.get(trace_id)
        if found is None:
            raise JsonRpcException(f"unknown trace: {shown(trace_id)}", code=REQUEST_FAILED)
        return found

    def at(self, path: Path, line: int) -> tuple[Trace, list[Any]] | None:
        """The freshest trace with nodes at ``line`` (0-based) of ``path``, and those nodes
        (innermost first)."""
        key = str(path.resolve())
        for trace in self.ls.session.graphs.covering(key):
            nodes = trace.nodes_at(key, line + 1)
            if nodes:
                return trace, nodes
        return None

    def reveal(self, data: wire.RevealSourceParams) -> wire.RevealSourceResult:
        trace = self.find(data["traceId"])
        node_id = data["nodeId"]
        node = trace.node(node_id)
        if node is None:
            raise JsonRpcException(f"unknown node {shown(node_id)} in trace {trace.id}", code=REQUEST_FAILED)
        frame_index = data.get("frame")
        frames = node.frames or ([node.source] if node.source else [])
        if frame_index is None:  # the user's own line (innermost workspace frame), not a library's
            frame = node.source or (frames[0] if frames else None)
            if frame is None:
                raise JsonRpcException(f"node {node_id} has no source frame", code=REQUEST_FAILED)
        elif frame_index < 0:
            raise invalid(f"params.frame: expected a frame index, got {frame_index}")
        elif frame_index >= len(frames):
            raise JsonRpcException(f"node {node_id} has no frame {frame_index}", code=REQUEST_FAILED)
        else:
            frame = frames[frame_index]
        uri, selection = self.ls.frame_location(frame, trace.frame_path(frame))
        self.ls.show_document(types.ShowDocumentParams(uri=uri, selection=selection, take_focus=True))
        return {"location": {"uri": uri, "range": range_json(selection)}}
