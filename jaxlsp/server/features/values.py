"""``jaxlsp/values``: the statistics of an existing trace's values, and small arrays on request.

A trace made with ``values: true`` already holds its statistics: they are answered from it. For
a shapes-only trace, or when arrays are asked for (the server keeps no arrays), the trace's
target runs again as a values run, with the profile and answers it was traced with; its
statistics are added to the stored trace when the graph is the same (the same equations in the
same order), and the request fails when the source changed since (trace it again).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

from pygls.exceptions import JsonRpcException

from jaxlsp.capture.engine import TraceFailure, finish
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.service import Busy, CaptureService
from jaxlsp.graph.compact import Packed
from jaxlsp.graph.model import Graph
from jaxlsp.graph.store import Trace
from jaxlsp.server import wire
from jaxlsp.server.display import visible
from jaxlsp.server.features.tracing import TraceArgs, Tracing
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, invalid, known_trace, parse, shown


class Values:
    def __init__(self, ls: Host, tracing: Tracing, capture: CaptureService) -> None:
        self.ls = ls
        self.tracing = tracing
        self.capture = capture

    def register(self, server: Host) -> None:
        @server.feature(wire.VALUES)
        async def values(ls: Host, params: Any) -> wire.ValuesResult:
            return await self.values(parse(params, wire.ValuesParams))

    async def values(self, data: wire.ValuesParams) -> wire.ValuesResult:
        trace = known_trace(self.ls.session.graphs, data["traceId"])
        wanted = self.wanted(trace, data)
        inline = sorted(wanted) if data.get("inline") else []
        arrays: dict[str, Any] = {}
        if trace.execution is None or inline:
            arrays = await self.run(trace, inline, data.get("dims"))
        execution = trace.execution or {}
        chosen = wanted or None
        result: wire.ValuesResult = {
            "traceId": trace.id,
            "seconds": float(execution.get("seconds") or 0.0),
            "validation": dict(execution.get("validation") or {}),
            "executed": dict(execution.get("executed") or {}),
            "stats": trace.stats(chosen),
        }
        first = self.tracing.first_non_finite(trace)
        if first is not None:
            result["firstNonFinite"] = first
        if execution.get("gradients") is not None:
            result["gradients"] = cast(wire.Gradients, execution["gradients"])
        if inline:
            result["arrays"] = {vid: cast(wire.InlineArray, arrays.get(vid, {})) for vid in inline}
        return result

    def wanted(self, trace: Trace, data: wire.ValuesParams) -> set[str]:
        """The value ids asked for: ``values``, and the inputs and outputs of ``nodes``."""
        out: set[str] = set()
        for vid in data.get("values") or []:
            if trace.value(vid) is None:
                raise invalid(f"params.values: no value {shown(vid)} in trace {trace.id}")
            out.add(vid)
        for nid in data.get("nodes") or []:
            node = trace.node(nid)
            if node is None:
                raise invalid(f"params.nodes: no node {shown(nid)} in trace {trace.id}")
            out.update(node.inputs)
            out.update(node.outputs)
        return out

    async def run(self, trace: Trace, inline: list[str], dims: dict[str, int] | None) -> dict[str, Any]:
        """A values run of the trace's target; its statistics go into the stored trace."""
        meta = trace.meta
        uri, name = str(meta.get("uri")), str(meta.get("name"))
        args = TraceArgs.parse(
            {"uri": uri, "name": name, **({"profile": meta["profile"]} if meta.get("profile") else {})},
            "trace",
            self.ls.notebooks,
        )
        args = dataclasses.replace(
            args, answers=meta.get("answers"), save=False, values=True, dims=dims or meta.get("dims")
        )
        folder = self.ls.session.folder_of(args.path)
        if not await self.tracing.trust.ensure(folder):
            raise JsonRpcException(
                f"not run: {visible(str(folder))} is not trusted to run its code", code=REQUEST_FAILED
            )
        req = self.tracing.request(args, folder)
        assert req.values is not None
        req.values.inline = inline
        timeout = self.ls.session.options.timeout
        options = CaptureOptions(timeout=timeout) if timeout else CaptureOptions()
        try:
            prepared = self.tracing.prepare(req)  # call sites from the warm finder, when planning needs them
            outcome = await self.capture.capture(prepared, options)
            fresh = finish(prepared, outcome).graph
        except TraceFailure as failure:
            raise JsonRpcException(
                failure.paragraph(), code=REQUEST_FAILED, data={"kind": failure.kind, "dims": failure.dims}
            ) from None
        except Busy as exc:
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from None
        if not same_program(trace.packed, fresh):
            stale = trace.stale_sources(lambda p: self.ls.session.index.text(Path(p)))
            why = f" ({', '.join(visible(Path(p).name) for p in stale)} changed)" if stale else ""
            raise JsonRpcException(
                f"trace {trace.id} is not the program its target traces now{why}: trace it again with values",
                code=REQUEST_FAILED,
            )
        trace.set_values([v.stats for v in fresh.values], fresh.execution)
        self.ls.session.graphs.touch(trace)
        self.tracing.diagnose_values(uri, name, trace)
        arrays: dict[str, Any] = outcome.result.get("arrays") or {}
        return arrays


def same_program(a: Packed, b: Graph) -> bool:
    """The same equations in the same order, producing as many values (``a`` read from its columns)."""
    return (
        a.node_count == len(b.nodes)
        and a.value_count == len(b.values)
        and all(a.strings[a.primitive[i]] == y.primitive and a.outputs(i) == y.outputs for i, y in enumerate(b.nodes))
    )
