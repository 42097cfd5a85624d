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
from jaxlsp.graph.store import Trace
from jaxlsp.graph.summary import shape_str
from jaxlsp.server.app import JaxServer
from jaxlsp.server.convert import range_json
from jaxlsp.server.features.documents import _path
from jaxlsp.server.params import as_dict, invalid, require_str, text_document_uri

REQUEST_FAILED = -32803
FORMATS = {"json": ".json", "dot": ".dot", "html": ".html"}
HOVER_LINES = 12


def export_dir() -> Path:
    """Exports go to the user's cache, never into the workspace."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jaxlsp" / "exports"


def _trace(ls: JaxServer, data: Any) -> Trace:
    trace_id = require_str(data, "traceId", "params")
    found = ls.session.graphs.get(trace_id)
    if found is None:
        raise JsonRpcException(f"unknown trace: {trace_id}", code=REQUEST_FAILED)
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


def _position(data: Any) -> tuple[int, int]:
    position = data.get("position") if isinstance(data, dict) else None
    line = position.get("line") if isinstance(position, dict) else None
    character = position.get("character") if isinstance(position, dict) else None
    if not isinstance(line, int) or not isinstance(character, int) or line < 0 or character < 0:
        raise invalid(f"params.position: expected {{line, character}} (non-negative integers), got {position!r}")
    return line, character


def _read(ls: JaxServer, path: str) -> str | None:
    return ls.session.index.text(Path(path))


def register(server: JaxServer) -> None:
    @server.feature("jaxlsp/nodesAt")
    def nodes_at(ls: JaxServer, params: Any) -> dict[str, Any]:
        data = as_dict(params)
        uri = text_document_uri(data, "params")
        line, _ = _position(data)
        path = _path(uri)
        if path is None:
            raise invalid(f"params.textDocument.uri: only file: URIs are supported, got {uri!r}")
        for trace in ls.session.graphs.covering(str(path.resolve())):
            nodes = trace.nodes_at(str(path.resolve()), line + 1)
            if nodes:
                return {"traceId": trace.id, "nodeIds": [n.id for n in nodes]}
        return {"traceId": None, "nodeIds": []}

    @server.feature("jaxlsp/export")
    def export_graph(ls: JaxServer, params: Any) -> dict[str, Any]:
        data = as_dict(params)
        trace = _trace(ls, data)
        fmt = data.get("format", "json")
        if fmt not in FORMATS:
            raise invalid(f"params.format: expected one of json, dot, html, got {fmt!r}")
        return {"uri": write_export(trace, fmt).as_uri()}

    @server.feature("jaxlsp/revealSource")
    async def reveal_source(ls: JaxServer, params: Any) -> dict[str, Any]:
        return await reveal(ls, as_dict(params))

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


async def reveal(ls: JaxServer, data: Any) -> dict[str, Any]:
    """``jaxlsp/revealSource`` (also the viewer's clicks): the node's frame as a location, shown in the editor."""
    trace = _trace(ls, data)
    node_id = require_str(data, "nodeId", "params")
    node = trace.node(node_id)
    if node is None:
        raise JsonRpcException(f"unknown node {node_id} in trace {trace.id}", code=REQUEST_FAILED)
    frame_index = data.get("frame", 0)
    if not isinstance(frame_index, int) or isinstance(frame_index, bool) or frame_index < 0:
        raise invalid(f"params.frame: expected a frame index, got {frame_index!r}")
    frames = node.frames or ([node.source] if node.source else [])
    if frame_index >= len(frames):
        raise JsonRpcException(f"node {node_id} has no frame {frame_index}", code=REQUEST_FAILED)
    uri, selection = ls.frame_location(frames[frame_index])
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
    doc = ls.workspace.get_text_document(uri)
    lines = doc.lines
    hints = []
    for line in range(first, min(last, len(lines) - 1) + 1):
        text = lines[line].rstrip("\r\n")
        if not _ASSIGNMENT.match(text):
            continue
        nodes = [n for n in traces[0].nodes_at(key, line + 1) if n.frames and n.frames[0].path == key]
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
    # No footer: a trace id or a method name means nothing to the reader, and a link would need
    # a trusted command URI that not every editor renders.
    return "\n".join(lines)
