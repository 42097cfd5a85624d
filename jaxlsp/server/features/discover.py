"""``jaxlsp/discover``: a document's entrypoints with their setup fields (docs/lsp-extensions.md)."""

from __future__ import annotations

from typing import Any

from jaxlsp.server import wire
from jaxlsp.server.app import JaxServer
from jaxlsp.server.convert import entry_json
from jaxlsp.server.params import file_path, parse


class Discover:
    def __init__(self, ls: JaxServer) -> None:
        self.ls = ls

    def register(self, server: JaxServer) -> None:
        @server.feature(wire.DISCOVER)
        def discover(ls: JaxServer, params: Any) -> wire.DiscoverResult:
            uri = parse(params, wire.DiscoverParams)["textDocument"]["uri"]
            path = file_path(uri, "params.textDocument.uri")
            found = ls.session.discover(path, revalidate=True)
            lines = ls.lines(path)
            codec = ls.workspace.position_codec
            return {
                "entrypoints": [entry_json(e, lines, codec) for e in found.entrypoints],
                "drivers": [entry_json(e, lines, codec) for e in found.drivers],
            }
