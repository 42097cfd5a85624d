"""Pausing Python's cyclic garbage collector around bulk work on graphs (stdlib only).

Parsing or building a graph allocates tens of thousands of objects that all survive; each
allocation burst triggers collections that walk every tracked object, the server's kept graphs
and libraries included, and free nothing. In a process holding three earlier graphs, reading a
3,000-equation result's JSON took 0.07-0.19 s with the collector on and 0.02 s with it paused.
Shared by the worker (building) and the server (reading).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from typing import Any

_lock = threading.Lock()
_pauses = 0  # blocks inside paused() now, in any thread
_restore = False  # whether the collector was on when the first of them began
_trim: Any = None  # glibc's malloc_trim once looked up; False where there is none


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block (reference counting still frees what it can).

    Counted: the server pauses it in several threads at once (graph work runs off its event loop),
    and the collector comes back on only when the last of them ends."""
    global _pauses, _restore
    with _lock:
        if _pauses == 0:
            _restore = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _restore:
                gc.enable()


def off_until_exit() -> None:
    """The collector off for good, the blocks inside :func:`paused` included: for a process that
    exits once its result is written (a capture worker), where a collection at the end of the
    last pause would walk the whole graph it is about to drop."""
    global _restore
    with _lock:
        _restore = False
        gc.disable()


def sweep() -> None:
    """One full collection over everything, frozen objects included, then freeze again.

    The server freezes what it keeps (summaries, graphs and their indexes: see
    ``jaxlsp.offloop`` and the document and trace features) so that no full pass walks it while
    requests wait; a reference cycle that became garbage just before a freeze (an exception and
    its traceback's frames, say) would then be kept for good. A sweep frees those, at the cost of
    one pass over every object, so the server runs it only while the client is quiet (``jaxlsp.server.app``)."""
    with _lock:
        if _pauses:  # graph work in a thread allocates with the collector off: not now
            return
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    trim()


def trim() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere).

    A big graph made whole for a while (an HTML export, a cost analysis) and freed leaves its
    memory free but still counted in the process's RSS: glibc keeps it for later allocations."""
    global _trim
    if _trim is None:
        _trim = False
        try:
            import ctypes

            _trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            pass
    if _trim:
        _trim(0)
