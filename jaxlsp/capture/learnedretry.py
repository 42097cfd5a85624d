"""The retry of a trace on learned calls with symbolic dimensions that failed (issue 56.5): the
target is traced again on its newest concrete learned call, in the same request, saying which
dimension forced it (``capture/inputs/learnedshapes.py`` merges the calls; the capture service
calls :func:`concrete_retry` as it calls auto's next example)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

from jaxlsp.capture import engine
from jaxlsp.capture.engine import Prepared, TraceFailure
from jaxlsp.capture.inputs.plan import Origin
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.recipes import RecipeError, Resolved, resolve_table


def concrete_retry(prepared: Prepared, failure: TraceFailure) -> Prepared | None:
    """After a failed trace on learned calls with symbolic dimensions: the target prepared again
    on its newest concrete call, saying which dimension forced it; the store remembers that, so
    the next trace goes straight to the concrete call. None when the trace was
    not such a one, or ran out of time or memory (a concrete one would too)."""
    origin, req = prepared.origin, prepared.req
    symbols = [str(s) for s in prepared.request.get("profile", {}).get("symbolic") or []]
    if origin is None or req is None or origin.how != "learned" or not symbols:
        return None
    if failure.kind in ("timeout", "memory", "crash", "cancelled"):
        return None
    named = [s for s in failure.symbolic or [] if s in symbols]  # the worker's reading, never the text
    dimension = named[0] if named else ", ".join(symbols)
    target = prepared.request["target"]
    path, name = Path(str(target["path"])), str(target["name"])
    store = SignatureStore(req.workspace_root, req.signature_cache)
    try:
        found = store.lookup(prepared.python, path, name)
        if found is None or found.newest is None:
            return None
        reason = _reason(failure, origin.root)
        store.mark_concrete(prepared.python, path, name, dimension, reason)
        table = {"target": prepared.resolved.table["target"], **found.newest}
        made = resolve_table(prepared.resolved.name, table, origin.base or origin.root)
    except (OSError, RecipeError):
        return None
    if not isinstance(made, Resolved):
        return None
    why = f"{dimension} failed symbolically ({reason})"
    note = f"inputs from a learned call at {replace(found, sizes={}, forced=why).where(origin.root)} (learned)"
    after = Origin("learned", origin.root, note=note, base=origin.base)
    request = engine.build_request(req, made, prepared.recipe_path, after)
    return dataclasses.replace(prepared, request=request, resolved=made, origin=after)


def _reason(failure: TraceFailure, root: Path) -> str:
    """``at tagger/models.py:25: <the failure's first line>``, short."""
    text = failure.message.strip()
    line = text.splitlines()[0] if text else "no message"
    line = line if len(line) <= 160 else line[:157] + "..."
    frame = failure.frame or {}
    if not frame.get("path"):
        return line
    try:
        where = Path(str(frame["path"])).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        where = str(frame["path"])
    return f"at {where}:{frame.get('line', '?')}: {line}"
