"""Graph work off the event loop: serialising, exporting, diffing, decoding and indexing a big graph
runs in a thread of its own, so that hovers and pages keep being answered meanwhile.

A thread is enough because the work is Python that the interpreter interrupts every few
milliseconds to let the loop's thread run, with the two exceptions that are not: one ``json`` call
over a whole graph (the C codec holds the GIL to its end), done here in slices
(``jaxlsp.graph.slices``), and the cyclic collector walking every object the work allocates,
paused for its duration (``jaxlsp.graph.collector``), what it made frozen after. Figures in
docs/reliability.md: on a 60,000-equation graph, hovers waited 5-7 s behind this work in the loop.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from jaxlsp.graph import collector

P = ParamSpec("P")
T = TypeVar("T")

# Two at once: a third big export waits rather than holding a third graph's JSON in memory.
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="jaxlsp-graph")


async def off_loop(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` in a graph thread, the cyclic collector paused."""

    def run() -> T:
        with collector.paused():
            result = func(*args, **kwargs)
            # What the work made and keeps (a trace's indexes, a level, an analysis) was allocated
            # with the collector off: left young, the next collection, in whichever thread
            # allocates next (the loop's, often), would walk all of it at once (a 60,000-equation
            # graph's levels: a second). Frozen like the kept graphs (tracing.py).
            gc.freeze()
        # What the work made and dropped (a whole graph for an HTML export, two for a diff of
        # files) is free but still in the RSS until the C heap gives it back; in this thread
        # (ctypes lets go of the GIL for the call).
        collector.trim()
        return result

    return await asyncio.get_running_loop().run_in_executor(_POOL, run)
