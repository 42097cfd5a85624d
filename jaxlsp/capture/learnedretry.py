"""The retries of a trace on learned calls that failed, in the same request; the capture service
calls them as it calls auto's next example.

- :func:`concrete_retry` (issue 56.5): a trace on learned calls with symbolic dimensions is traced
  again on the target's newest concrete learned call, saying which dimension forced it
  (``capture/inputs/learnedshapes.py`` merges the calls).
- :func:`replay_retry` (issue 56): a learned call spells shapes and dtypes, not values, so a
  target that checks its arguments' values while it runs (interpax's ``PPoly.__init__``: ``if
  jnp.any(dx < 0): raise``, under ``make_jaxpr`` a ``TracerBoolConversionError``) cannot trace on
  it, and random arrays of those shapes would fail the check anyway. The test that made the call
  is replayed up to it instead (``capture/inputs/replays.py``, as ``--from`` runs it), and the
  store remembers that, so the next trace replays it first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from dataclasses import replace
from pathlib import Path

from jaxlsp.capture import engine
from jaxlsp.capture.engine import Prepared, TraceFailure
from jaxlsp.capture.inputs.plan import Origin, example_profile, project_root_for
from jaxlsp.capture.inputs.replays import ReplayStore, replay_helps
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.recipes import RecipeError, Resolved, resolve_table
from jaxlsp.worker.protocol import ErrorKind

_CONTEXT = re.compile(r"^tracing \S+ failed: ")  # the worker's own words (worker/process/trace.py)
_DOCS = re.compile(r"\s*See https://\S+$")  # JAX's link to its errors page
# JAX's errors for a traced value Python needed concretely (``if``, ``int()``, ``np.asarray``):
# the worker writes the exception's class name before its message (worker/core/failures.py,
# first_paragraph). TracerBoolConversionError and the others are ConcretizationTypeError's
# subclasses, each raised under its own name.
_CONCRETE = re.compile(
    r"\b(ConcretizationTypeError|TracerBoolConversionError|TracerIntegerConversionError|TracerArrayConversionError): "
)


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


def replay_retry(prepared: Prepared, failure: TraceFailure) -> Prepared | None:
    """After a trace on a learned call that failed where Python needed a value (a
    concretization error): the target prepared again replaying the example that made the call
    (kept by learning, fresh), saying why; the store remembers it, so that planning replays the
    example first from then on. None for any other trace or failure, or when no example is kept."""
    origin, req = prepared.origin, prepared.req
    if origin is None or req is None or origin.how != "learned":
        return None
    target = prepared.request["target"]
    path, name = Path(str(target["path"])), str(target["name"])
    replays = ReplayStore(req.workspace_root, req.signature_cache)
    if origin.example is not None:  # the replay failed as well: the next trace need not run it again
        if failure.kind in (ErrorKind.TRACE, ErrorKind.EXAMPLE):
            with contextlib.suppress(OSError):
                replays.mark_replay_failed(prepared.python, path, name)
        return None
    if failure.kind != ErrorKind.TRACE or _CONCRETE.search(failure.message) is None:
        return None
    try:
        kept = replays.lookup(prepared.python, path, name)
        if kept is None or not Path(str(kept.example.get("path", ""))).exists():
            return None
        if replay_helps(kept.failed) is False:
            return None  # it checks its own arguments: traced in the replay as well, it failed there too
        frame = failure.frame or {}
        failing = [str(Path(str(frame["path"])).resolve())] if frame.get("path") else []
        replays.mark_failed(prepared.python, path, name, _reason(failure, origin.root, short=True), failing)
        kept = replays.lookup(prepared.python, path, name) or kept
        made = example_profile(
            kept.kind,
            str(prepared.resolved.table["target"]),
            origin.base or origin.root,
            prepared.resolved.name,
            kept.spec(),
        )
    except (OSError, RecipeError):
        return None
    if not isinstance(made, Resolved):
        return None
    after = Origin("learned", project_root_for(req), example=kept.spec(), base=origin.base, note=kept.note())
    request = engine.build_request(req, made, prepared.recipe_path, after)
    return dataclasses.replace(prepared, request=request, resolved=made, origin=after)


def _reason(failure: TraceFailure, root: Path, short: bool = False) -> str:
    """``at tagger/models.py:25: <the failure's first line>``, short; ``short``: without the
    worker's ``tracing NAME failed:`` and JAX's pointer to its documentation."""
    text = failure.message.strip()
    line = text.splitlines()[0] if text else "no message"
    if short:
        line = _DOCS.sub("", _CONTEXT.sub("", line, count=1)).strip() or line
    line = line if len(line) <= 160 else line[:157] + "..."
    frame = failure.frame or {}
    if not frame.get("path"):
        return line
    try:
        where = Path(str(frame["path"])).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        where = str(frame["path"])
    return f"at {where}:{frame.get('line', '?')}: {line}"
