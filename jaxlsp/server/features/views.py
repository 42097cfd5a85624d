"""Views over traced graphs: ``jaxlsp/nodesAt``, ``jaxlsp/export``, ``jaxlsp/revealSource`` and
hover with the shapes a line produced (marked stale after edits; it also highlights the viewer)."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.graph import export, io
from jaxlsp.graph.report import shape_str
from jaxlsp.graph.store import Trace
from jaxlsp.server import wire
from jaxlsp.server.app import JaxServer
from jaxlsp.server.convert import range_json
from jaxlsp.server.features.documents import _path
from jaxlsp.server.params import file_path, invalid, parse, shown

REQUEST_FAILED = -32803
FORMATS = {"json": ".json", "dot": ".dot", "html": ".html"}
HOVER_LINES = 12


def export_dir() -> Path:
    """Exports go to the user's cache, never into the workspace."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jaxlsp" / "exports"


def find_trace(ls: JaxServer, trace_id: str) -> Trace:
    found = ls.session.graphs.get(trace_id)
    if found is None:
        raise JsonRpcException(f"unknown trace: {shown(trace_id)}", code=REQUEST_FAILED)
    return found


def write_export(trace: Trace, fmt: str) -> Path:
    target = export_dir() / f"{trace.id}{FORMATS[fmt]}"
    target.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        io.write(trace.graph, target)
    else:
        text = export.to_dot(trace.graph) if fmt == "dot" else export.to_html(trace.graph)
        target.write_text(text, encoding="utf-8")
    return target


def document_line(data: wire.NodesAtParams | wire.CursorMovedParams) -> tuple[Path, int]:
    """The file and 0-based line a ``{textDocument, position}`` param points at."""
    position = data["position"]
    if position["line"] < 0 or position["character"] < 0:
        raise invalid(f"params.position: expected non-negative integers, got {shown(position)}")
    return file_path(data["textDocument"]["uri"], "params.textDocument.uri"), position["line"]


def _read(ls: JaxServer, path: str) -> str | None:
    return ls.session.index.text(Path(path))


def register(server: JaxServer) -> None:
    @server.feature("jaxlsp/nodesAt")
    def nodes_at(ls: JaxServer, params: Any) -> dict[str, Any]:
        path, line = document_line(parse(params, wire.NodesAtParams))
        for trace in ls.session.graphs.covering(str(path.resolve())):
            nodes = trace.nodes_at(str(path.resolve()), line + 1)
            if nodes:
                return {"traceId": trace.id, "nodeIds": [n.id for n in nodes]}
        return {"traceId": None, "nodeIds": []}

    @server.feature("jaxlsp/export")
    def export_graph(ls: JaxServer, params: Any) -> dict[str, Any]:
        data = parse(params, wire.ExportParams)
        trace = find_trace(ls, data["traceId"])
        return {"uri": write_export(trace, data.get("format", "json")).as_uri()}

    @server.feature("jaxlsp/revealSource")
    async def reveal_source(ls: JaxServer, params: Any) -> dict[str, Any]:
        return await reveal(ls, parse(params, wire.RevealSourceParams))

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hint(ls: JaxServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        return inlay_hints(ls, params.text_document.uri, params.range.start.line, params.range.end.line)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: JaxServer, params: types.HoverParams) -> types.Hover | None:
        path = _path(params.text_document.uri)
        if path is None:
            return None
        key = str(path.resolve())
        for trace in ls.session.graphs.covering(key):
            nodes = trace.nodes_at(key, params.position.line + 1)
            if nodes:
                if ls.viewer is not None:
                    ls.viewer.highlight(trace.id, [n.id for n in nodes])
                return types.Hover(
                    contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_text(ls, trace, nodes))
                )
        return None


async def reveal(ls: JaxServer, data: wire.RevealSourceParams) -> dict[str, Any]:
    """``jaxlsp/revealSource`` (also the viewer's clicks): the node's frame as a location, shown in the editor."""
    trace = find_trace(ls, data["traceId"])
    node_id = data["nodeId"]
    node = trace.node(node_id)
    if node is None:
        raise JsonRpcException(f"unknown node {shown(node_id)} in trace {trace.id}", code=REQUEST_FAILED)
    frame_index = data.get("frame", 0)
    if frame_index < 0:
        raise invalid(f"params.frame: expected a frame index, got {frame_index}")
    frames = node.frames or ([node.source] if node.source else [])
    if frame_index >= len(frames):
        raise JsonRpcException(f"node {node_id} has no frame {frame_index}", code=REQUEST_FAILED)
    uri, selection = ls.frame_location(frames[frame_index], trace.frame_path(frames[frame_index]))
    ls.show_document(types.ShowDocumentParams(uri=uri, selection=selection, take_focus=True))
    return {"location": {"uri": uri, "range": range_json(selection)}}


_ASSIGNMENT = re.compile(r"\s*[A-Za-z_][\w.,\s\[\]]*(?::[^=]+)?=(?!=)")


def inlay_hints(ls: JaxServer, uri: str, first: int, last: int) -> list[types.InlayHint]:
    """The type of the value each assignment line binds, from the freshest trace covering it."""
    path = _path(uri)
    if path is None or not ls.session.options.inlay_hints:
        return []
    key = str(path.resolve())
    traces = ls.session.graphs.covering(key)
    if not traces:
        return []
    lines = ls.lines(path)
    hints = []
    for line in range(first, min(last, len(lines) - 1) + 1):
        text = lines[line].rstrip("\r\n")
        if not _ASSIGNMENT.match(text):
            continue
        nodes = [n for n in traces[0].nodes_at(key, line + 1) if n.frames and traces[0].frame_path(n.frames[0]) == key]
        if not nodes:
            continue
        last_node = max(nodes, key=lambda n: int(n.id[1:]) if n.id[1:].isdigit() else 0)
        types_ = [shape_str(v) for o in last_node.outputs if (v := traces[0].value(o)) is not None]
        if not types_:
            continue
        position = ls.workspace.position_codec.position_to_client_units(lines, types.Position(line, len(text)))
        hints.append(
            types.InlayHint(
                position=position, label=": " + ", ".join(types_), kind=types.InlayHintKind.Type, padding_left=True
            )
        )
    return hints


def hover_text(ls: JaxServer, trace: Trace, nodes: list[Any]) -> str:
    """Operations at the line with their output types, aggregated over repeated calls."""
    counts: Counter[tuple[str, str]] = Counter()
    for n in nodes:
        outs = ", ".join(shape_str(value) for v in n.outputs if (value := trace.value(v)) is not None)
        counts[(n.primitive, outs)] += 1
    stale = trace.stale_sources(lambda p: _read(ls, p))
    meta = trace.meta
    state = (
        "**stale**: re-trace to update (changed: " + ", ".join(Path(p).name for p in stale) + ")" if stale else "fresh"
    )
    lines = [f"**jaxlsp** · `{meta.get('name')}` · profile `{meta.get('profile')}` · {state}", ""]
    for (primitive, outs), count in counts.most_common(HOVER_LINES):
        times = f" \u00d7{count}" if count > 1 else ""  # the multiplication sign: "x12"
        lines.append(f"- `{primitive}` → `{outs}`{times}")
    if len(counts) > HOVER_LINES:
        lines.append(f"- … {len(counts) - HOVER_LINES} more")
    scopes = sorted({n.scope for n in nodes if n.scope})
    if scopes:
        lines += ["", "scope: " + ", ".join(f"`{s}`" for s in scopes[:4])]
    lines += ["", f"trace `{trace.id}` · node `{nodes[0].id}` (jaxlsp/revealSource)"]
    return "\n".join(lines)
