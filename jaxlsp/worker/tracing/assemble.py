"""The canonical graph assembled from a traced jaxpr (the builder's walk, labels, sources and
versions), and its JSON forms for the result.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import TYPE_CHECKING, Protocol, cast

from jaxlsp.worker.core.failures import Workspace
from jaxlsp.worker.core.versions import versions

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr

    from jaxlsp.graph.model import Graph
    from jaxlsp.worker.core.paths import Spelling
    from jaxlsp.worker.protocol import WorkerRequest
    from jaxlsp.worker.tracing.build import GraphBuilder
    from jaxlsp.worker.tracing.contracts import Contracts


class _Plan(Protocol):
    """What the graph takes of the loader's plan (``loading/targets.py`` Plan)."""

    @property
    def scope_mode(self) -> str: ...


class _Traced(Protocol):
    """What the graph takes of the traced target (``loading/targets.py`` Traceable)."""

    @property
    def input_labels(self) -> list[tuple[str, str]]: ...


class _Notebook(Protocol):
    """The loader's notebook run (``loading/notebooks.py`` NotebookRun): its cell and notes."""

    @property
    def cell(self) -> int: ...

    @property
    def notes(self) -> list[str]: ...


def graph_from_jaxpr(
    request: WorkerRequest,
    path: str,
    workspace: Workspace,
    timings: dict[str, float],
    t0: float,
    closed: ClosedJaxpr,
    output_labels: list[tuple[str, str]],
    plan: _Plan,
    traced: _Traced,
    files: set[str],
    used_profile: dict[str, object],
    kind: str,
    extra: dict[str, object],
    notebook: _Notebook | None = None,
) -> tuple[Graph, GraphBuilder]:
    """The graph from a traced jaxpr (``t0``: when building started) and its builder (which
    recorded the walk when a values run follows, and kept the equations when costs follow:
    ``program/requested.py``); ``output_labels``: the outputs' labels (``targets.output_labels``);
    ``extra`` receives the roots its relative paths are relative to; ``notebook``: the loader's
    notebook (its cell and notes) when the target is defined in one."""
    from jaxlsp.graph.model import Graph
    from jaxlsp.worker.core.paths import Spelling
    from jaxlsp.worker.tracing.build import GraphBuilder, forwarded_outputs

    target = request["target"]
    base = request.get("pathBase") or request.get("workspaceRoot") or os.path.dirname(path)
    spelling = Spelling(str(base), workspace)
    gb = GraphBuilder(
        workspace,
        plan.scope_mode,
        spelling,
        keep_equations=bool(request.get("costs")),
        record=request.get("values") is not None,
    )
    in_ports, out_ports = gb.build(closed, traced.input_labels, output_labels)
    # State outputs are updates: one that is its input passed through changed nothing.
    unchanged = forwarded_outputs(closed)
    out_ports = [p for i, p in enumerate(out_ports) if not (p.role == "state" and i in unchanged)]
    sources = _sources(
        {path, *gb.frame_files, *files, *([request["recipePath"]] if request.get("recipePath") else [])},
        spelling,
        {os.path.realpath(p): cells.digest() for p, cells in workspace.notebooks.items()},
    )
    if notebook is not None:
        gb.coverage.notes.extend(notebook.notes)
    graph = Graph(
        target={"path": spelling.relative(path), "name": str(target["name"]), "kind": kind}
        | ({"cell": notebook.cell} if notebook is not None else {}),
        profile=used_profile,
        versions=dict(versions()),
        coverage=gb.coverage,
        sources=sources,
        inputs=in_ports,
        outputs=out_ports,
        nodes=gb.nodes,
        values=gb.values,
        groups=gb.groups,
        mesh=gb.mesh,
    )
    check = cast("Contracts | None", extra.pop("contracts", None))  # process/trace.py puts it there
    if check is not None and check.active:
        graph.contracts = check.section(spelling)
    # Where the relative paths are relative to: for the server's own use, never in the graph file.
    extra["roots"] = {"base": spelling.base, "packages": dict(sorted(spelling.roots.items()))}
    timings["build"] = time.perf_counter() - t0
    return graph, gb


def graph_json(graph: Graph, request: WorkerRequest, timings: dict[str, float]) -> dict[str, object]:
    """The graph's JSON form (as the server reads it), timed as ``serialize``."""
    t0 = time.perf_counter()
    data = to_json(graph, packed=request.get("transport") == "packed")
    timings["serialize"] = time.perf_counter() - t0
    return data


def _sources(paths: set[str], spelling: Spelling, digests: dict[str, str]) -> dict[str, str]:
    """Spelled path (as frames spell it: relative to the base) -> sha256 of each file; a
    notebook's (in ``digests``) is of its code cells' text, which is what the server compares an
    edited notebook with."""
    out: dict[str, str] = {}
    for p in sorted(paths):
        if os.path.realpath(p) in digests:
            out[spelling.relative(p)] = digests[os.path.realpath(p)]
            continue
        try:
            with open(p, "rb") as f:
                out[spelling.relative(p)] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            continue
    return out


def to_json(graph: Graph, packed: bool = False) -> dict[str, object]:
    """The graph's JSON form (``jaxlsp.graph.io.to_json``), or with ``packed`` the smaller form
    for the pipe to the server (``io.to_compact``: each distinct string, frame and stack once)."""
    from jaxlsp.graph import io

    data: dict[str, object] = io.to_compact(graph) if packed else io.to_json(graph)
    return data
