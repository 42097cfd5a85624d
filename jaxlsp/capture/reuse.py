"""A live re-trace that needs no capture: when every file a target's last graph read is as it was
traced, or changed only where its syntax tree stays the same (comments, blank lines, a
formatter's line breaks and quotes: :mod:`jaxlsp.live.samecode`), the program is the same, and
that graph with its positions moved to the new text (:mod:`jaxlsp.live.relocate`) is what a
capture would give. A 100,000-equation model's live re-trace after a comment edit takes 0.44 s
from the save to fresh instead of a 19 s capture (benchmarks/scale.py, column LIVE).

Only for what the same text cannot make different: the same request (profile, inputs, limits,
options) to the same interpreter, no example run, no values, timing or compiled program (those
measure a run). The graph's ``sources`` are every workspace file the capture read (the target,
the modules it imported, the recipe, factories); a changed file that is not Python (the recipe,
a notebook) always traces again. A graph any of whose Python sources reads positions while it runs
(a frame's line, ``inspect.getsource``: :func:`jaxlsp.live.samecode.reads_positions`) is never
moved, whichever file changed: a helper that reads its caller's line gets another value when
only the caller's file moved. No pygls, no processes here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxlsp.capture.engine import Prepared, TraceOutcome
from jaxlsp.graph.store import Trace
from jaxlsp.live.relocate import relocate
from jaxlsp.live.samecode import Moves, moves, reads_positions

KEPT = 16  # traces remembered (the store keeps 16)
MAX_TEXT = 4 << 20  # bytes: a bigger source is not kept, and its edits trace again
_MEASURED = ("values", "time", "compiled")  # requests whose graph records a run


def request_key(prepared: Prepared) -> str | None:
    """What decides the capture besides the files' text; None when a capture cannot be reused."""
    request = prepared.request
    if any(k in request for k in _MEASURED) or request["profile"].get("example"):
        return None
    # ``offline`` (a live trace's guard against downloads) changes what may run, not the program:
    # a live trace after an explicit one reuses the explicit one's graph
    decided = {k: v for k, v in request.items() if k != "offline"}
    return json.dumps([prepared.python, decided], sort_keys=True, default=repr)


@dataclass
class Kept:
    """What a stored trace's capture was: its request key, its outcome (the graph's small parts,
    the inputs' origin), the digests of its Python sources whose traced text is kept, and whether
    one of them reads positions (or could not be read to tell): such a graph is never moved."""

    key: str
    outcome: TraceOutcome
    digests: dict[str, str]  # absolute path -> sha256 of the text as traced
    reads_positions: bool = False


class Reuse:
    """The texts and outcomes of the last :data:`KEPT` traces, and the moved trace an unchanged
    program gets from them."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, Kept] = OrderedDict()  # trace id -> what made it
        self._texts: dict[str, str] = {}  # sha256 -> a traced source's text
        self._lock = threading.Lock()  # two captures' graph threads may remember at once

    def remember(self, trace: Trace, key: str | None, outcome: TraceOutcome) -> None:
        """Keep what ``trace`` was made of (reads its Python sources: run it off the loop)."""
        if key is None:
            return
        digests: dict[str, str] = {}
        texts: dict[str, str] = {}
        reads = False
        for spelled, digest in trace.info.sources.items():
            path = trace.resolve(spelled)
            if not path.endswith(".py"):
                continue
            data = _read(path)
            if data is None or hashlib.sha256(data).hexdigest() != digest:
                reads = True  # what it ran is not known to be free of frame reads
                continue  # changed since the worker read it: an edit of it traces again
            try:
                texts[digest] = data.decode("utf-8")
            except UnicodeDecodeError:
                reads = True
                continue
            digests[path] = digest
            reads = reads or reads_positions(texts[digest])
        with self._lock:
            self._texts.update(texts)
            self._kept[trace.id] = Kept(key, dataclasses.replace(outcome), digests, reads)
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
            live = {d for kept in self._kept.values() for d in kept.digests.values()}
            for digest in [d for d in self._texts if d not in live]:
                del self._texts[digest]

    def moved(self, before: Trace, key: str | None, meta: dict[str, Any]) -> tuple[Trace, TraceOutcome] | None:
        """``before`` (the target's newest trace) moved to the files' text now, as a new trace
        labelled ``meta``, when a capture of ``key`` would give its program again; else None."""
        with self._lock:
            kept = self._kept.get(before.id)
            if key is None or kept is None or kept.key != key or kept.reads_positions:
                return None
            traced = {path: self._texts.get(digest) for path, digest in kept.digests.items()}
        moved: dict[str, Moves] = {}
        sources: dict[str, str] = {}
        for spelled, digest in before.info.sources.items():
            path = before.resolve(spelled)
            data = _read(path)
            if data is None:
                return None
            now = hashlib.sha256(data).hexdigest()
            if now == digest:
                continue
            old = traced.get(path)
            if old is None:
                return None  # not Python, or its traced text is not known
            try:
                found = moves(old, data.decode("utf-8"))
            except UnicodeDecodeError:
                return None
            if found is None:
                return None
            moved[spelled], sources[spelled] = found, now
        if not moved:
            return None  # nothing changed that the graph read: what changed is elsewhere, trace
        packed = relocate(before.packed, moved, sources)
        if packed is None:
            return None
        trace = before.moved(packed, {**before.meta, **meta})
        return trace, dataclasses.replace(kept.outcome, graph=packed.shell())


def _read(path: str) -> bytes | None:
    try:
        file = Path(path)
        if file.stat().st_size > MAX_TEXT:
            return None
        return file.read_bytes()
    except OSError:
        return None
