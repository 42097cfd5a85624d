"""Work done once before captures: the warm spare's (``warm``, then ``prime`` with what its
captures noted) and an early worker's (``warm_capture``). No user code.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from jaxlsp.worker.core.versions import versions
from jaxlsp.worker.reuse import priming

#: The worker's modules every capture of a target imports (the rest only for costs, values, examples...).
CAPTURE_MODULES = (
    "core.phases",
    "loading.inputs",
    "loading.loading",
    "reuse.hints",
    "loading.targets",
    "tracing.assemble",
    "tracing.build",
    "tracing.devices",
    "tracing.scopes",
    "tracing.jaxcompat",
    "tracing.limits",
    "reuse.priming",
    "reuse.initsnap",
    "program.requested",
    "process.trace",
)


def warm_capture() -> None:
    """What every capture of a target needs, done before its request (an early worker): the
    package versions, the worker's own modules, JAX's user-frame patterns. No user code."""
    import importlib

    versions()
    for name in CAPTURE_MODULES:
        importlib.import_module(f"jaxlsp.worker.{name}")
    importlib.import_module("jaxlsp.graph.io")
    from jaxlsp.worker.tracing import jaxcompat

    jaxcompat.warm()


def warm() -> None:
    """Called once by the warm spare before it forks: precompute what every capture needs.

    The worker's own modules are imported here too, so each forked capture does not pay their
    import again (about 10 ms: half of a small model's graph building)."""
    import importlib

    versions()
    for name in (
        *CAPTURE_MODULES,
        "program.costs",
        "values.run",
        "examples.firstcall",
        "examples.runners",
        "examples.learned",
        "tracing.contracts",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(f"jaxlsp.worker.{name}")
    importlib.import_module("jaxlsp.graph.io")
    importlib.import_module("jaxlsp.graph.compact_write")  # the result's form (io.to_compact imports it late)
    from jaxlsp.worker.core import failures
    from jaxlsp.worker.reuse import replay
    from jaxlsp.worker.tracing import contracts, jaxcompat

    jaxcompat.warm()
    jaxcompat.linear_input_check()
    contracts.warm()
    if "flax.linen" in sys.modules:  # the replay hook set before the forks (replay.install)
        replay.install()
    failures.remember_loaded()  # last: the modules above are loaded now


def prime(entries: object, stop: Callable[[], bool] | None = None) -> int:
    """Called by the warm spare with what its captures noted: make those calls of JAX's own
    functions on abstract values, so the next fork finds JAX's caches filled (worker/reuse/priming.py);
    ``stop()`` true ends it early."""
    return priming.prime(entries, stop)
