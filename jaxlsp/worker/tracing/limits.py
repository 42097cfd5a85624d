"""Graph-size limits (stdlib only): a target over a limit is refused with its figures, never truncated.

Equations and values are counted from the jaxpr right after tracing, before any graph is built;
bytes are measured on the serialized result (the compact form, version 2). The limits arrive in ``WorkerRequest.limits``
(the engine always sends them; the server's settings ``jaxlsp.limits.*`` and the CLI's
``--max-*`` flags raise them). Without ``limits`` in the request nothing is checked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.protocol import LIMIT_SETTINGS as SETTINGS
from jaxlsp.worker.protocol import resolve_limits as resolve

if TYPE_CHECKING:
    from jax.extend import core as jex


def count(closed: jex.ClosedJaxpr) -> tuple[int, int]:
    """Equations (nested jaxprs included, as the graph has one node per equation) and the values
    the program defines (inputs, constants, literal operands, results; an upper bound of the
    graph's values, which shares the operands a region reads from outside)."""
    from jaxlsp.worker.tracing.build import find_jaxprs

    jaxpr = closed.jaxpr
    equations = 0
    values = len(jaxpr.constvars) + len(jaxpr.invars)
    plain: set[type] = set()  # variable types; anything else among operands is a literal
    stack = [jaxpr]
    while stack:
        current = stack.pop()
        for eqn in current.eqns:
            equations += 1
            values += len(eqn.outvars)
            for atom in eqn.invars:
                kind = type(atom)
                if kind not in plain:
                    if kind.__name__ == "Literal":
                        values += 1
                    else:
                        plain.add(kind)
            if not eqn.params:
                continue
            for _, sub in find_jaxprs(eqn.params):
                inner = (
                    cast("jex.ClosedJaxpr", sub).jaxpr
                    if type(sub).__name__ == "ClosedJaxpr"
                    else cast("jex.Jaxpr", sub)
                )
                values += len(inner.constvars) + len(inner.invars)
                stack.append(inner)
    return equations, values


def _over(what: str, found: str, limit: str, key: str) -> str:
    setting, flag = SETTINGS[key]
    return (
        f"the traced program {what} {found}, over the limit of {limit} per graph; nothing was cut "
        f"(a graph is never truncated). Raise the limit with the setting {setting} "
        f"(initializationOptions) or {flag} on the command line, or trace a smaller part of the model"
    )


def check_jaxpr(closed: jex.ClosedJaxpr, raw: object) -> None:
    """Refuse a jaxpr with more equations or values than the request's limits allow."""
    if raw is None:
        return
    limits = resolve(raw)
    try:
        equations, values = count(closed)
    except Exception:  # a jaxpr shape this jax version does not share: the bytes limit still holds
        return
    if equations > limits["equations"]:
        raise CaptureError("refused", _over("has", f"{equations:,} equations", f"{limits['equations']:,}", "equations"))
    if values > limits["values"]:
        raise CaptureError("refused", _over("defines", f"{values:,} values", f"{limits['values']:,}", "values"))


def check_bytes(data: bytes, raw: object) -> bytes:
    """``data`` (a serialized result), or a ``refused`` result when it is over the bytes limit."""
    if raw is None:
        return data
    limit = resolve(raw)["bytes"]
    if len(data) <= limit:
        return data
    mib = 1024 * 1024
    message = _over(
        "serializes to",
        f"{len(data):,} bytes ({len(data) / mib:.1f} MiB)",
        f"{limit:,} bytes ({limit / mib:.1f} MiB)",
        "bytes",
    )
    return json.dumps({"ok": False, "error": {"kind": "refused", "message": message}}).encode()
