"""A proposal traced with its jaxtyping dimensions symbolic (recipes/symbolic.py), seen from the service.

Two turns back to the sizes: a symbolic trace that fails because a dimension cannot stay a
symbol (``int(n)``, ``if n > 3``) is answered with the proposal's needs-input (the forcing
dimension first, saying why), as if it had never been tried; and a request that carries answers
to that needs-input traces the sizes given, not the symbols again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from jaxlsp.capture.engine import Prepared, build_request
from jaxlsp.capture.request import TraceFailure
from jaxlsp.recipes import NeedsInput, RecipeError
from jaxlsp.recipes.answers import fill
from jaxlsp.recipes.symbolic import fallback
from jaxlsp.worker.protocol import ErrorKind


def answered(prepared: Prepared) -> Prepared:
    """``prepared`` as its request's answers to the symbolic proposal's fallback make it; raises
    TraceFailure as the engine does for answers that do not fit or leave something to ask."""
    needs = prepared.resolved.fallback
    req = prepared.req
    if needs is None or req is None or not req.answers:
        return prepared
    try:
        selected = fill(needs, req.answers)
    except RecipeError as exc:
        raise TraceFailure(ErrorKind.REFUSED, f"the answers do not fit: {exc}", problems=list(exc.problems)) from None
    if isinstance(selected, NeedsInput):
        missing = "; ".join(str(m.get("message") or m.get("path")) for m in selected.missing)
        raise TraceFailure(ErrorKind.NEEDS_INPUT, f"{req.name} needs input: {missing}", needs=selected)
    origin = replace(prepared.origin, note=None) if prepared.origin is not None else None
    request = build_request(req, selected, prepared.recipe_path, origin)
    return replace(prepared, request=request, resolved=selected, origin=origin)


def fell_back(prepared: Prepared, failure: TraceFailure) -> TraceFailure:
    """``failure``, or the proposal's needs-input when a dimension could not stay a symbol."""
    frame = failure.frame or {}
    where = f"{Path(str(frame['path'])).name}:{frame.get('line')}" if frame.get("path") else ""
    traced = failure.kind == ErrorKind.TRACE
    needs = fallback(prepared.resolved, failure.message, failure.symbolic, where) if traced else None
    if needs is None:
        return failure
    name = prepared.req.name if prepared.req is not None else str(prepared.request["target"].get("name"))
    missing = "; ".join(str(m.get("message") or m.get("path")) for m in needs.missing)
    return TraceFailure(ErrorKind.NEEDS_INPUT, f"{name} needs input: {missing}", needs=needs, root=failure.root)
