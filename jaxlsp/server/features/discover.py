"""``jaxlsp/discover``: a document's entrypoints with their setup fields (docs/lsp-extensions.md).
In a notebook (its file, or one cell's document) each item names its ``cell`` and its ranges
count within that cell. At most :data:`MAX_ITEMS` of each are listed, with ``truncated`` saying
how many there are."""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import replace
from typing import Any

from jaxlsp.discovery import Entrypoint, Span
from jaxlsp.server import wire
from jaxlsp.server.convert import entry_json
from jaxlsp.server.encoded import Encoded, encode_members
from jaxlsp.server.features.documents import Documents, sliced
from jaxlsp.server.features.lenses import shortage_error
from jaxlsp.server.host import Host
from jaxlsp.server.params import file_path, invalid, parse, shown
from jaxlsp.server.views import View
from jaxlsp.textfiles import Shortage

log = logging.getLogger(__name__)
# Items listed per answer, in each of entrypoints and drivers, as for lenses (lenses.py): 25,000
# entrypoints answered 9 MB; past the limit, ``truncated`` says how many there are.
MAX_ITEMS = 2_000


class Discover:
    def __init__(self, ls: Host, documents: Documents) -> None:
        self.ls = ls
        self.documents = documents

    def register(self, server: Host) -> None:
        @server.feature(wire.DISCOVER)
        async def discover(ls: Host, params: Any) -> Encoded:  # a wire.DiscoverResult
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
            entrypoints, total = await sliced(self.items(found.entrypoints, view))
            drivers, total_drivers = await sliced(self.items(found.drivers, view))
            result: wire.DiscoverResult = {"entrypoints": entrypoints, "drivers": drivers}
            if total > len(entrypoints) or total_drivers > len(drivers):
                result["truncated"] = {"entrypoints": total, "drivers": total_drivers, "limit": MAX_ITEMS}
                log.info("%s: %d entrypoints, %d drivers; %d listed", view.path, total, total_drivers, MAX_ITEMS)
            # Up to 4,000 items of a few hundred bytes each: encoded in slices (encoded.py).
            return await encode_members(result)

    def items(
        self, entries: tuple[Entrypoint, ...], view: View
    ) -> Generator[None, None, tuple[list[wire.EntrypointItem], int]]:
        """The first :data:`MAX_ITEMS` of the entries' items and how many there are in all
        (counted in this document: a cell's document counts its cell's), yielding between them
        (25,000 of them took 4 s)."""
        out: list[wire.EntrypointItem] = []
        total = 0
        for e in entries:
            if len(out) < MAX_ITEMS:
                item = self.item(e, view)
                if item is not None:
                    out.append(item)
                    total += 1
            elif self.shown(e, view):
                total += 1
            yield
        return out, total

    def shown(self, entry: Entrypoint, view: View) -> bool:
        """Whether ``entry`` is in the document ``view`` (a cell's document shows its cell's)."""
        if view.cells is None:
            return True
        where = view.cells.locate(entry.header.line)
        block = view.cells.block(where[0]) if where is not None else None
        return block is not None and (view.cell is None or block.cell == view.cell)

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
