"""What a request asks of the compiled program after the graph is built: XLA's cost of every
equation (``costs``) and the compiled module read back to nodes (``compiled``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jaxlsp.worker.core.phases import announce
from jaxlsp.worker.protocol import WorkerRequest

if TYPE_CHECKING:
    import jax
    from jax.extend.core import ClosedJaxpr

    from jaxlsp.graph.model import Graph
    from jaxlsp.worker.loading.targets import Traceable
    from jaxlsp.worker.tracing.build import GraphBuilder


def measure(
    request: WorkerRequest,
    graph: Graph,
    builder: GraphBuilder,
    closed: ClosedJaxpr,
    traced: Traceable,
    used_profile: Mapping[str, object],
    timings: dict[str, float],
    device: jax.Device | None = None,
) -> None:
    """Add the costs and the compiled program the request asks for to ``graph``; ``builder`` is
    the graph's (its kept equations, its path spelling); ``device``: the jax device a compiled
    program is made for (None: the default, the CPU)."""
    costs = request.get("costs")
    if costs:
        announce(request, "costs")
        t0 = time.perf_counter()
        from jaxlsp.worker.program.costs import measure as measure_costs

        measure_costs(
            graph,
            builder.eqns,
            closed,
            costs,
            str(used_profile.get("device", "cpu")),
            bool(used_profile.get("x64")),
        )
        timings["costs"] = time.perf_counter() - t0
    if request.get("compiled"):
        announce(request, "compile")
        t0 = time.perf_counter()
        from jaxlsp.worker.program.compiled import measure as compile_program

        spelling = builder.spelling
        platform = str(used_profile.get("device", "cpu")).split(":", 1)[0] or "cpu"
        topology = used_profile.get("topology")
        if topology:  # traced on the CPU, compiled for the pod (worker/tracing/topology.py)
            platform = "tpu"
        compile_program(
            graph, closed, traced, device, platform, lambda p: spelling.spell(p)[0], str(topology) if topology else None
        )
        timings["compile"] = time.perf_counter() - t0
