"""The canonical graph assembled from a traced jaxpr (the builder's walk, labels, sources and
versions), and its JSON forms for the result.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

from jaxlsp.worker.core.failures import Workspace
from jaxlsp.worker.core.versions import versions


def graph_from_jaxpr(
    request: dict[str, Any],
    path: str,
    workspace: Workspace,
    timings: dict[str, float],
    t0: float,
    closed: Any,
    output_labels: Any,
    plan: Any,
    traced: Any,
    files: set[str],
    used_profile: dict[str, Any],
    kind: str,
    extra: dict[str, Any],
    notebook: Any = None,
) -> tuple[Any, Any]:
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
    check = extra.pop("contracts", None)
    if check is not None and check.active:
        graph.contracts = check.section(spelling)
    # Where the relative paths are relative to: for the server's own use, never in the graph file.
    extra["roots"] = {"base": spelling.base, "packages": dict(sorted(spelling.roots.items()))}
    timings["build"] = time.perf_counter() - t0
    return graph, gb


def graph_json(graph: Any, request: dict[str, Any], timings: dict[str, float]) -> dict[str, Any]:
    """The graph's JSON form (as the server reads it), timed as ``serialize``."""
    t0 = time.perf_counter()
    data = to_json(graph, packed=request.get("transport") == "packed")
    timings["serialize"] = time.perf_counter() - t0
    return data


def _sources(paths: set[str], spelling: Any, digests: dict[str, str]) -> dict[str, str]:
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


def to_json(graph: Any, packed: bool = False) -> dict[str, Any]:
    """The graph's JSON form (``jaxlsp.graph.io.to_json``), or with ``packed`` the smaller form
    for the pipe to the server (``io.to_compact``: each distinct string, frame and stack once)."""
    from jaxlsp.graph import io

    data: dict[str, Any] = io.to_compact(graph) if packed else io.to_json(graph)
    return data
