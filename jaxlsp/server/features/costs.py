"""``jaxlsp/costs``: what each module of a trace costs (XLA's FLOPs, bytes, transcendentals; the
forward / backward split of a gradient), its memory peak and residuals, and its precision
settings (``jaxlsp.graph.analysis``). A trace made without costs answers ``measured: false``
with what needs no XLA (parameters, memory, precision): trace with ``costs: true`` for the rest."""

from __future__ import annotations

from typing import Any, cast

from jaxlsp.graph.costs import render_table, table
from jaxlsp.graph.store import Trace
from jaxlsp.offloop import off_loop
from jaxlsp.server import wire
from jaxlsp.server.host import Host
from jaxlsp.server.params import invalid, known_trace, parse, shown

MAX_MODULES = 5000


class Costs:
    def __init__(self, ls: Host) -> None:
        self.ls = ls

    def register(self, server: Host) -> None:
        @server.feature(wire.COSTS)
        async def costs(ls: Host, params: Any) -> wire.CostsResult:
            return await self.costs(parse(params, wire.CostsParams))

    async def costs(self, data: wire.CostsParams) -> wire.CostsResult:
        limit = data.get("limit", 200)
        if not 1 <= limit <= MAX_MODULES:
            raise invalid(f"params.limit: expected an integer from 1 to {MAX_MODULES}, got {shown(limit)}")
        trace = known_trace(self.ls.session.graphs, data["traceId"])
        # off the loop: a 60,000-equation graph's analysis takes a second (jaxlsp/offloop.py)
        analysis, text = await off_loop(_costs, trace)
        found = dict(analysis)
        found["modules"] = found["modules"][:limit]
        found["traceId"] = trace.id
        found["text"] = text
        return cast(wire.CostsResult, found)  # analysis_json builds this shape (jaxlsp.graph has no wire types)


def _costs(trace: Trace) -> tuple[dict[str, Any], str]:
    """The analysis and the cost table (in a graph thread)."""
    analysis = trace.analysis()  # kept with the trace: made once, from a whole graph of its own
    with trace.whole() as graph:
        return analysis, render_table(table(graph))
