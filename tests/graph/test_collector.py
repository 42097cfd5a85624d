"""The collector's sweep: a reference cycle frozen with the server's kept objects is freed."""

from __future__ import annotations

import gc
import weakref

from jaxlsp.graph import collector


class Node:
    def __init__(self) -> None:
        self.me: Node | None = self


def test_a_cycle_frozen_as_garbage_is_freed_by_a_sweep() -> None:
    cycle = Node()
    alive = weakref.ref(cycle)
    gc.freeze()  # as the server does after keeping a graph (offloop, tracing, documents)
    try:
        del cycle
        gc.collect()
        assert alive() is not None  # frozen: no collection sees it, refcounting cannot free it
        collector.sweep()
        assert alive() is None
    finally:
        gc.unfreeze()


def test_no_sweep_while_graph_work_has_the_collector_paused() -> None:
    cycle = Node()
    alive = weakref.ref(cycle)
    gc.freeze()
    try:
        del cycle
        with collector.paused():
            collector.sweep()
            assert alive() is not None
    finally:
        gc.unfreeze()
        gc.collect()
