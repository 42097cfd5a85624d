"""``jaxlsp/export``: a trace written as JSON, Graphviz DOT or one offline HTML page, into the user's
cache (never into the workspace). The writing runs off the event loop (``jaxlsp/offloop.py``): a
60,000-equation graph's page takes seconds to make."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jaxlsp.graph import export, io
from jaxlsp.graph.store import Trace
from jaxlsp.offloop import off_loop
from jaxlsp.server import wire
from jaxlsp.server.features.navigation import Navigation
from jaxlsp.server.host import Host
from jaxlsp.server.params import parse

SUFFIXES = {"json": ".json", "dot": ".dot", "html": ".html"}


def export_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jaxlsp" / "exports"


def write_export(trace: Trace, fmt: str) -> Path:
    target = export_dir() / f"{trace.id}{SUFFIXES[fmt]}"
    target.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        io.write_text(trace.packed.iter_json(), target)  # the expanded form, a row at a time
    else:
        with trace.whole() as graph:
            text = export.to_dot(graph) if fmt == "dot" else export.to_html(graph)
        target.write_text(text, encoding="utf-8")
    return target


class Export:
    def __init__(self, ls: Host, navigation: Navigation) -> None:
        self.ls = ls
        self.navigation = navigation

    def register(self, server: Host) -> None:
        @server.feature(wire.EXPORT)
        async def export_graph(ls: Host, params: Any) -> wire.ExportResult:
            data = parse(params, wire.ExportParams)
            trace = self.navigation.find(data["traceId"])
            return {"uri": (await off_loop(write_export, trace, data.get("format", "json"))).as_uri()}
