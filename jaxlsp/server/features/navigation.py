"""From graph to source and back: ``jaxlsp/nodesAt`` (the nodes a source line produced) and
``jaxlsp/revealSource`` (a node's frame, shown in the editor; also the viewer's clicks)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.graph.store import NodeSeq, Trace
from jaxlsp.server import wire
from jaxlsp.server.convert import range_json
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, file_path, invalid, known_trace, parse, shown


def document_line(ls: Host, data: wire.NodesAtParams | wire.CursorMovedParams) -> tuple[str, int]:
    """The document (a file, or a notebook cell the client synchronises) and 0-based line a
    ``{textDocument, position}`` param points at."""
    position = data["position"]
    if position["line"] < 0 or position["character"] < 0:
        raise invalid(f"params.position: expected non-negative integers, got {shown(position)}")
    uri = data["textDocument"]["uri"]
    if ls.notebooks.cell(uri) is None:
        file_path(uri, "params.textDocument.uri")
    return uri, position["line"]


def traced_cell(trace: Trace, uri: str, cell: int | None) -> int | None:
    """The index a cell document had when ``trace`` was made (its ``cellUris``), else ``cell``:
    hover follows a cell, not its place, when cells are inserted or deleted above it."""
    uris = trace.meta.get("cellUris")
    return uris.index(uri) if isinstance(uris, list) and uri in uris else cell


class Navigation:
    def __init__(self, ls: Host) -> None:
        self.ls = ls

    def register(self, server: Host) -> None:
        @server.feature(wire.NODES_AT)
        def nodes_at(ls: Host, params: Any) -> wire.NodesAtResult:
            found = self.at(*document_line(ls, parse(params, wire.NodesAtParams)))
            return (
                {"traceId": found[0].id, "nodeIds": found[1].ids}
                if found
                else {
                    "traceId": None,
                    "nodeIds": [],
                }
            )

        @server.feature(wire.REVEAL_SOURCE)
        async def reveal_source(ls: Host, params: Any) -> wire.RevealSourceResult:
            return self.reveal(parse(params, wire.RevealSourceParams))

    def find(self, trace_id: str) -> Trace:
        return known_trace(self.ls.session.graphs, trace_id)

    def at(self, uri: str, line: int) -> tuple[Trace, NodeSeq] | None:
        """The freshest trace with nodes at ``line`` (0-based) of the document ``uri`` (a file, a
        notebook cell, a notebook), and those nodes (innermost first)."""
        view = self.ls.view(uri)
        where = view.frame_at(line) if view is not None else None
        if view is None or where is None:
            return None
        key = str(view.path.resolve())
        for trace in self.ls.session.graphs.covering(key):
            nodes = trace.nodes_at(key, where[1], traced_cell(trace, view.uri, where[0]))
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
        uri, selection = self.ls.frame_location(frame, trace.frame_path(frame), trace.meta.get("cellUris"))
        self.ls.show_document(types.ShowDocumentParams(uri=uri, selection=selection, take_focus=True))
        return {"location": {"uri": uri, "range": range_json(selection)}}
