"""Discovery's plain types to LSP types, in the negotiated position encoding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from jaxlsp.discovery import Entrypoint, Span
from jaxlsp.server import wire
from jaxlsp.server.views import View

TRACE_COMMAND = wire.TRACE_GRAPH_COMMAND
VALUES_COMMAND = wire.TRACE_WITH_VALUES_COMMAND
COMPILED_COMMAND = wire.TRACE_COMPILED_COMMAND
OPEN_COMMAND = wire.OPEN_GRAPH_COMMAND
LENS_TITLE = "Trace graph"
OPEN_TITLE = "Open graph"
VALUES_TITLE = "Trace with values"
COMPILED_TITLE = "Trace compiled"


def to_range(span: Span, lines: Sequence[str], codec: PositionCodec) -> types.Range:
    start = codec.position_to_client_units(lines, types.Position(span.line, span.column))
    end = codec.position_to_client_units(lines, types.Position(span.end_line, span.end_column))
    return types.Range(start, end)


def shown_span(span: Span, view: View) -> Span | None:
    """``span`` (module lines) in the document ``view`` shows; None when it shows another cell."""
    line = view.from_module(span.line)
    end = view.from_module(span.end_line)
    if line is None or end is None:
        return None
    return Span(line, span.column, end, span.end_column)


def trace_command(uri: str, entry_name: str) -> types.Command:
    argument: wire.TraceGraphArguments = {"uri": uri, "name": entry_name}
    return types.Command(title=LENS_TITLE, command=TRACE_COMMAND, arguments=[argument])


def values_command(uri: str, entry_name: str) -> types.Command:
    """The "Trace with values" lens: a trace with ``values`` (statistics on every value)."""
    argument: wire.TraceGraphArguments = {"uri": uri, "name": entry_name}
    return types.Command(title=VALUES_TITLE, command=VALUES_COMMAND, arguments=[argument])


def compiled_command(uri: str, entry_name: str) -> types.Command:
    """The "Trace compiled" code action: a trace with ``compiled`` (what XLA made of it)."""
    argument: wire.TraceGraphArguments = {"uri": uri, "name": entry_name}
    return types.Command(title=COMPILED_TITLE, command=COMPILED_COMMAND, arguments=[argument])


def open_command(trace_id: str, node_id: str | None = None) -> types.Command:
    argument: wire.OpenGraphArguments = {"traceId": trace_id}
    if node_id is not None:
        argument["nodeId"] = node_id
    return types.Command(title=OPEN_TITLE, command=OPEN_COMMAND, arguments=[argument])


def entry_json(
    entry: Entrypoint, lines: Sequence[str], codec: PositionCodec, cell: int | None = None
) -> wire.EntrypointItem:
    """An entrypoint as ``jaxlsp/discover`` returns it (camelCase, LSP ranges); in a notebook,
    ``entry``'s spans are already within ``cell``, whose lines ``lines`` are."""
    rng = to_range(entry.header, lines, codec)
    body = to_range(entry.body, lines, codec)
    item: wire.EntrypointItem = {
        "name": entry.name,
        "kind": entry.kind,
        "range": range_json(rng),
        "bodyRange": range_json(body),
        "decorators": list(entry.decorators),
        "fields": [
            wire.SetupField(name=f.name, annotation=f.annotation, default=f.default, kind=_field_kind(f.kind))
            for f in entry.fields
        ],
        "reason": entry.reason,
    }
    if cell is not None:
        item["cell"] = cell
    return item


def range_json(rng: types.Range) -> wire.Range:
    return {
        "start": {"line": rng.start.line, "character": rng.start.character},
        "end": {"line": rng.end.line, "character": rng.end.character},
    }


def _field_kind(name: str) -> wire.FieldKind:
    head, *rest = name.split("_")
    return cast(wire.FieldKind, head + "".join(p.capitalize() for p in rest))
