"""``jaxlsp/discover``: a document's entrypoints with their setup fields (docs/lsp-extensions.md).
In a notebook (its file, or one cell's document) each item names its ``cell`` and its ranges
count within that cell."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

from jaxlsp.discovery import Entrypoint, Span
from jaxlsp.server import wire
from jaxlsp.server.app import JaxServer
from jaxlsp.server.convert import entry_json
from jaxlsp.server.features.documents import Documents, sliced
from jaxlsp.server.features.lenses import shortage_error
from jaxlsp.server.params import file_path, invalid, parse, shown
from jaxlsp.server.views import View
from jaxlsp.textfiles import Shortage


class Discover:
    def __init__(self, ls: JaxServer, documents: Documents) -> None:
        self.ls = ls
        self.documents = documents

    def register(self, server: JaxServer) -> None:
        @server.feature(wire.DISCOVER)
        async def discover(ls: JaxServer, params: Any) -> wire.DiscoverResult:
            uri = parse(params, wire.DiscoverParams)["textDocument"]["uri"]
            path = self.documents.path_of(uri)
            try:
                found = await self.documents.discover(path) if path is not None else None  # in slices
            except Shortage as exc:  # never an empty answer that reads as "nothing here"
                raise shortage_error(exc) from None
            view = ls.view(uri)
            if view is None:
                file_path(uri, "params.textDocument.uri")  # says why a URI is not a file
                raise invalid(f"params.textDocument.uri: cannot read {shown(uri)}")
            if found is None or found.path != view.path.resolve():
                try:
                    found = ls.session.discover(view.path, revalidate=True)
                except Shortage as exc:  # never an empty answer that reads as "nothing here"
                    raise shortage_error(exc) from None
            return {
                "entrypoints": await sliced(self.items(found.entrypoints, view)),
                "drivers": await sliced(self.items(found.drivers, view)),
            }

    def items(self, entries: tuple[Entrypoint, ...], view: View) -> Generator[None, None, list[wire.EntrypointItem]]:
        """The entries' items, yielding between them (25,000 of them took 4 s)."""
        out = []
        for e in entries:
            item = self.item(e, view)
            if item is not None:
                out.append(item)
            yield
        return out

    def item(self, entry: Entrypoint, view: View) -> wire.EntrypointItem | None:
        codec = self.ls.workspace.position_codec
        if view.cells is None:
            return entry_json(entry, view.lines, codec)
        where = view.cells.locate(entry.header.line)
        block = view.cells.block(where[0]) if where is not None else None
        if block is None or (view.cell is not None and block.cell != view.cell):
            return None
        shift = block.start
        inside = replace(entry, header=_moved(entry.header, shift), body=_moved(entry.body, shift))
        lines = view.cells.lines[block.start : block.end + 1]
        return entry_json(inside, lines, codec, block.cell)


def _moved(span: Span, up: int) -> Span:
    return Span(span.line - up, span.column, span.end_line - up, span.end_column)
