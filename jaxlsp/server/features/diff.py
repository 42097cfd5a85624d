"""``jaxlsp/diff``: what changed between two graphs (``jaxlsp.graph.diff``), each a kept trace or
a graph file; by default a trace against the previous trace of the same target.

A graph file is read only from a workspace folder or the graph store (``$XDG_CACHE_HOME/jaxlsp``,
where ``jaxlsp/export`` writes), only if it is a regular file (a FIFO would block the read for
good, ``/dev/stdin`` is the server's own protocol input, ``/dev/zero`` never ends) and at most
:data:`MAX_GRAPH_FILE` bytes; reading, decoding and diffing run off the event loop
(``jaxlsp/offloop.py``): two 60,000-equation graphs take seconds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from pygls.exceptions import JsonRpcException

from jaxlsp.graph import io, slices
from jaxlsp.graph.compact import Packed
from jaxlsp.graph.diff import diff_packed
from jaxlsp.graph.model import Graph
from jaxlsp.graph.store import Trace
from jaxlsp.offloop import off_loop
from jaxlsp.server import wire
from jaxlsp.server.display import visible
from jaxlsp.server.features.exporting import export_dir
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, file_path, invalid, parse, shown
from jaxlsp.textfiles import Unreadable, read_bytes

MAX_LISTED = 10_000
MAX_GRAPH_FILE = 256 * 1024 * 1024  # the capture's own limit on a graph's JSON (capture/launch/options.py)


class Diff:
    def __init__(self, ls: Host) -> None:
        self.ls = ls

    def register(self, server: Host) -> None:
        @server.feature(wire.DIFF)
        async def graph_diff(ls: Host, params: Any) -> wire.DiffResult:
            return await self.diff(parse(params, wire.DiffParams))

    async def diff(self, data: wire.DiffParams) -> wire.DiffResult:
        limit = data.get("limit", 1000)
        if not 1 <= limit <= MAX_LISTED:
            raise invalid(f"params.limit: expected an integer from 1 to {MAX_LISTED}, got {shown(limit)}")
        if ("traceId" in data) == ("uri" in data):
            raise invalid("params: give the newer graph as exactly one of traceId and uri")
        if "base" in data and "baseUri" in data:
            raise invalid("params: give the older graph as at most one of base and baseUri")
        store = self.ls.session.graphs
        trace_id = data.get("traceId")
        # Both files are checked before either is read: a refusal costs nothing.
        newer_path = self._allowed(data["uri"], "params.uri") if trace_id is None else None
        older_path = self._allowed(data["baseUri"], "params.baseUri") if "baseUri" in data else None
        newer = self._trace(trace_id, "params.traceId").packed if trace_id is not None else None
        if "base" in data:
            older, base = self._trace(data["base"], "params.base").packed, data["base"]
        elif older_path is not None:
            older, base = None, data["baseUri"]
        else:
            trace = store.get(trace_id) if trace_id is not None else None
            previous = store.previous(trace) if trace is not None else None
            if trace is None or previous is None:
                raise JsonRpcException(
                    "no earlier trace of this target is kept to compare with: give base or baseUri",
                    code=REQUEST_FAILED,
                )
            found = (await off_loop(trace.changes_since, previous)).json(limit)
            return self._answer(found, trace_id, previous.id)
        found = await off_loop(_diff, older or older_path, newer or newer_path, limit)
        return self._answer(found, trace_id, base)

    @staticmethod
    def _answer(found: dict[str, Any], trace_id: str | None, base: str) -> wire.DiffResult:
        found["traceId"] = trace_id
        found["base"] = base
        return cast(wire.DiffResult, found)  # GraphDiff.json builds this shape

    def _trace(self, trace_id: str, where: str) -> Trace:
        trace = self.ls.session.graphs.get(trace_id)
        if trace is None:
            raise JsonRpcException(f"{where}: unknown trace {shown(trace_id)}", code=REQUEST_FAILED)
        return trace

    def _allowed(self, uri: str, where: str) -> Path:
        """The file ``uri`` names, if it lies in a workspace folder or the graph store (after its
        symlinks); else -32602 saying where graph files are read from."""
        path = file_path(uri, where)
        try:
            real = Path(os.path.realpath(path))
        except (OSError, ValueError) as exc:
            raise invalid(f"{where}: cannot resolve {shown(str(path))}: {shown(str(exc), 200)}") from None
        places = [*self.ls.session.roots, export_dir().parent]
        for place in places:
            try:
                if real.is_relative_to(Path(os.path.realpath(place))):
                    return real
            except (OSError, ValueError):
                continue
        said = ", ".join(visible(str(p)) for p in places)
        raise invalid(
            f"{where}: {shown(str(path))} is outside the workspace folders and the graph store: graph files "
            f"are read only from {said}"
        )


def _diff(older: Packed | Path | None, newer: Packed | Path | None, limit: int) -> dict[str, Any]:
    """The diff's JSON (in a graph thread), each side a kept graph (read from its columns) or a
    graph file read here: the graphs read are freed here too, not in the loop's thread (a
    60,000-equation graph: 0.3 s)."""
    assert older is not None and newer is not None  # one of each was given, checked by the caller
    after: Packed | Graph = _read(newer, "params.uri") if isinstance(newer, Path) else newer
    before: Packed | Graph = _read(older, "params.baseUri") if isinstance(older, Path) else older
    found = diff_packed(before, after).json(limit)
    # A graph read here is let go of a piece at a time: freed at once, each took the GIL for 0.6 s.
    for graph, read in ((after, isinstance(newer, Path)), (before, isinstance(older, Path))):
        if read:
            slices.release(graph)
    return found


def _read(path: Path, where: str) -> Graph:
    """The graph in the file at ``path`` (in a graph thread): a regular file within the cap, opened
    without blocking; -32602 when it is not one, -32803 when it cannot be read or is no graph."""
    data = read_bytes(path, MAX_GRAPH_FILE)
    if isinstance(data, Unreadable):
        if data.startswith("cannot "):  # missing, permissions: the request's file, not a refusal
            raise JsonRpcException(f"{where}: cannot read {visible(str(path))}: {data}", code=REQUEST_FAILED)
        raise invalid(f"{where}: not read: {visible(str(path))}: {data}")
    try:
        return io.loads(data, sliced=True)
    except (ValueError, RecursionError) as exc:
        message = f"{where}: cannot read {visible(str(path))}: {shown(str(exc), 300)}"
        raise JsonRpcException(message, code=REQUEST_FAILED) from None
