"""Figures about a graph and the one-screen text that ``jaxlsp trace`` and ``make demo`` print.

Stdlib only, Python >= 3.10.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jaxlsp.graph.model import Graph, Value
from jaxlsp.graph.shardings import dims_text, mesh_text, sets_text

TOP_SCOPES = 8
TOP_PRIMITIVES = 12
SHOWN_PORTS = 6

# Bytes per element; a dtype not listed (keys, extended dtypes) has no byte count.
_ITEMSIZE = {
    "bool": 1,
    "int2": 1,
    "int4": 1,
    "int8": 1,
    "uint2": 1,
    "uint4": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}


def itemsize(dtype: str) -> int | None:
    """Bytes per element of ``dtype``; a PRNG key counts its key data (``key<fry>``: two uint32);
    None for a dtype not known here."""
    if dtype.startswith("key<"):
        return 8 if dtype == "key<fry>" else 16
    return _ITEMSIZE.get(dtype)


def num_elements(value: Value) -> int | None:
    """The number of elements of ``value``; None when a dimension is symbolic."""
    return _size(value)


def short_dtype(dtype: str) -> str:
    """JAX's short spelling: ``float32`` -> ``f32``, ``bfloat16`` -> ``bf16``, ``uint8`` -> ``u8``."""
    return dtype.replace("float", "f").replace("uint", "u").replace("int", "i").replace("complex", "c")


def shape_str(value: Value) -> str:
    """``f32[4,10]``; a scalar is ``f32[]``, a symbolic dimension keeps its name (``f32[b,128]``);
    a sharded value as jax prints its type (``f32[8@x,64]``, ``f32[8,32]{U:x}``)."""
    if value.sharding is None:
        return f"{short_dtype(value.dtype)}[{','.join(str(d) for d in value.shape)}]"
    return f"{short_dtype(value.dtype)}[{dims_text(value.shape, value.sharding)}]{sets_text(value.sharding)}"


def _size(value: Value) -> int | None:
    n = 1
    for d in value.shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


@dataclass(frozen=True)
class Rows:
    """What the summary reads of a graph's nodes and values: their counts, the nodes by scope and
    by primitive, and a value by id; a packed graph answers from its columns
    (:meth:`jaxlsp.graph.packed.Packed.rows`), making no node or value it does not show."""

    ops: int
    values: int
    scopes: Counter[str]
    primitives: Counter[str]
    value: Callable[[str], Value | None]


def rows_of(graph: Graph) -> Rows:
    """:class:`Rows` of a graph's model objects."""
    values = {v.id: v for v in graph.values}
    scopes = Counter(n.scope for n in graph.nodes)
    prims = Counter(n.primitive for n in graph.nodes)
    return Rows(len(graph.nodes), len(graph.values), scopes, prims, values.get)


def summarize(graph: Graph, rows: Rows | None = None) -> dict[str, Any]:
    """Figures about ``graph`` (JSON-safe, camelCase keys); ``rows``: its nodes and values, when
    ``graph`` holds only its small parts (a packed graph's shell).

    ``parameters`` is the total number of elements of the inputs with role ``parameter``
    (``parameterBytes`` their size in memory; inputs with a symbolic dimension count in
    ``symbolicParameters`` instead). ``topScopes`` ranks scopes by the nodes whose scope is
    exactly that one (``""`` is the top level).
    """
    r = rows_of(graph) if rows is None else rows
    params = 0
    param_bytes: int | None = 0
    symbolic = 0
    for port in graph.inputs:
        value = r.value(port.value)
        if port.role != "parameter" or value is None:
            continue
        size = _size(value)
        if size is None:
            symbolic += 1
            continue
        params += size
        itemsize = _ITEMSIZE.get(value.dtype)
        param_bytes = None if itemsize is None or param_bytes is None else param_bytes + size * itemsize

    def port_json(port: Any) -> dict[str, str]:
        value = r.value(port.value)
        return {"label": port.label, "role": port.role, "shape": shape_str(value) if value else "?"}

    scopes, prims = r.scopes, r.primitives
    kinds = Counter(g.kind for g in graph.groups)
    return {
        "target": dict(graph.target),
        "profile": graph.profile.get("name"),
        "versions": dict(graph.versions),
        "ops": r.ops,
        "values": r.values,
        "groups": len(graph.groups),
        "groupKinds": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        "parameters": params,
        "parameterBytes": param_bytes,
        "symbolicParameters": symbolic,
        "inputs": [port_json(p) for p in graph.inputs],
        "outputs": [port_json(p) for p in graph.outputs],
        "outputShapes": [port_json(p)["shape"] for p in graph.outputs],
        "topScopes": [
            {"scope": s, "ops": c} for s, c in sorted(scopes.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_SCOPES]
        ],
        "primitives": dict(sorted(prims.items(), key=lambda kv: (-kv[1], kv[0]))),
        "complete": graph.coverage.complete,
        "opaque": [dict(o) for o in graph.coverage.opaque],
        "notes": list(graph.coverage.notes),
        "effects": list(graph.coverage.effects),
    }


def _count(n: int) -> str:
    return f"{n:,}"


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def _plural(n: int, word: str) -> str:
    return f"{_count(n)} {word}{'' if n == 1 else 's'}"


def _ports(title: str, ports: list[dict[str, str]], width: int) -> list[str]:
    if not ports:
        return [f"{title:<9}(none)"]
    lines = []
    for i, p in enumerate(ports[:SHOWN_PORTS]):
        lines.append(f"{title if i == 0 else '':<9}{p['label']:<{width}}  {p['shape']:<16} {p['role']}".rstrip())
    if len(ports) > SHOWN_PORTS:
        lines.append(f"{'':<9}... and {len(ports) - SHOWN_PORTS} more")
    return lines


def figure(x: Any) -> str:
    """A statistic as text: six significant digits (``0.0``, ``-1.5``, ``3.2e-05``); ``none``."""
    if x is None:
        return "none"
    if isinstance(x, float) and x != x:  # NaN
        return "nan"
    if isinstance(x, float) and x in (float("inf"), float("-inf")):
        return str(x)
    return repr(float(f"{float(x):.6g}"))


def stats_text(stats: dict[str, Any]) -> str:
    """``mean 0.01 · std 0.98 · 0 NaN`` (and infinities when there are any): hover's figures."""
    parts = []
    if stats.get("mean") is not None:
        parts.append(f"mean {figure(stats['mean'])}")
    if stats.get("std") is not None:
        parts.append(f"std {figure(stats['std'])}")
    parts.append(f"{_count(int(stats.get('nan', 0)))} NaN")
    infinities = int(stats.get("posInf", 0)) + int(stats.get("negInf", 0))
    if infinities:
        parts.append(f"{_count(infinities)} Inf")
    return " · ".join(parts)


def merge_stats(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts, mean and std of several values' statistics taken together (a line run by
    every layer): Chan's formula over their finite elements."""
    out: dict[str, Any] = {"count": 0, "finite": 0, "nan": 0, "posInf": 0, "negInf": 0, "mean": None, "std": None}
    mean = m2 = 0.0
    for s in items:
        for key in ("count", "nan", "posInf", "negInf"):
            out[key] += int(s.get(key, 0))
        n = int(s.get("finite", 0))
        if not n or s.get("mean") is None or s.get("std") is None:
            continue
        total = out["finite"] + n
        delta = float(s["mean"]) - mean
        mean += delta * n / total
        m2 += float(s["std"]) ** 2 * n + delta * delta * out["finite"] * n / total
        out["finite"] = total
    if out["finite"]:
        out["mean"], out["std"] = mean, (max(m2, 0.0) / out["finite"]) ** 0.5
    return out


GRADIENT_ROWS = 16
ZERO_SHOWN = 8


def render_values(graph: Graph) -> str:
    """What a values run found, under the summary: the replay validation, the first non-finite
    value's line (``first non-finite (-inf): log at nan.py:8, scan iteration 4, input min 0.0``)
    and, for gradient profiles, the gradient norms per module and the all-zero gradients."""
    execution = graph.execution
    if execution is None:
        return ""
    counted = sum(1 for v in graph.values if v.stats is not None)
    validation = execution.get("validation") or {}
    status = validation.get("status")
    seconds = float(execution.get("seconds") or 0.0)
    lines = [f"values: {_plural(counted, 'value')} on {execution.get('device', '?')} in {seconds:.2f}s"]
    if status == "verified":
        outputs = _plural(int(validation.get("outputs", 0)), "output")
        errors = (
            f"max abs error {figure(validation.get('maxAbsError'))}, "
            f"max rel error {figure(validation.get('maxRelError'))}"
        )
        lines.append(f"replay: verified against a direct call ({outputs}, {errors})")
    elif status == "partial":
        unchecked = _plural(int(validation.get("partialCount", 0)), "node")
        lines.append(f"replay: partial: the outputs agree with a direct call, but {unchecked} ran unchecked")
        lines.extend(f"  {p.get('node')}: {p.get('reason')}" for p in (validation.get("partial") or [])[:3])
    else:
        mismatch = validation.get("mismatch") or {}
        lines.append(
            f"replay: MISMATCH: {mismatch.get('message') or validation.get('message') or validation.get('error')}"
        )
    first = execution.get("firstNonFinite")
    lines.append(str(first["message"]) if first else "no NaN or Inf in any value")
    gradients = execution.get("gradients")
    if gradients:
        modules = list(gradients.get("modules") or [])
        if modules:
            lines.append("gradient norms by module:")
            width = min(40, max(len(m["module"] or "(all)") for m in modules[:GRADIENT_ROWS]))
            for m in modules[:GRADIENT_ROWS]:
                name = m["module"] or "(all)"
                zero = f", {m['zero']} all-zero" if m.get("zero") else ""
                lines.append(
                    f"  {name:<{width}}  {figure(m['norm']):>12}  ({_plural(int(m['parameters']), 'parameter')}{zero})"
                )
            if len(modules) > GRADIENT_ROWS:
                lines.append(f"  ... and {len(modules) - GRADIENT_ROWS} more modules")
        zeros = list(gradients.get("zero") or [])
        if zeros:
            shown = ", ".join(zeros[:ZERO_SHOWN]) + (
                f", +{len(zeros) - ZERO_SHOWN} more" if len(zeros) > ZERO_SHOWN else ""
            )
            lines.append(f"all-zero gradients: {shown}")
        else:
            lines.append("all-zero gradients: none")
    return "\n".join(lines)


def render_summary(graph: Graph, rows: Rows | None = None) -> str:
    """A one-screen text summary of ``graph`` (about 25 lines at most, no trailing newline);
    ``rows`` as for :func:`summarize`."""
    s = summarize(graph, rows)
    target = s["target"]
    head = f"{target.get('path', '?')}::{target.get('name', '?')}"
    if target.get("kind"):
        head += f" ({target['kind']})"
    if s["profile"]:
        head += f"  profile {s['profile']}"
    versions = ", ".join(f"{k} {v}" for k, v in s["versions"].items() if v)
    kinds = ", ".join(f"{k} {_count(c)}" for k, c in s["groupKinds"].items())
    lines = [head]
    if versions:
        lines.append(versions)
    counts = f"{_plural(s['ops'], 'op')}, {_plural(s['values'], 'value')}, {_plural(s['groups'], 'group')}"
    lines.append(counts + (f" ({kinds})" if kinds else ""))
    params = f"{_plural(s['parameters'], 'parameter')}"
    if s["parameterBytes"] is not None and s["parameters"]:
        params += f" ({_bytes(s['parameterBytes'])})"
    if s["symbolicParameters"]:
        params += f" + {s['symbolicParameters']} with symbolic shapes"
    lines.append(params)
    if graph.mesh is not None:
        lines.append(f"mesh: {mesh_text(graph.mesh)}")
    shown = s["inputs"][:SHOWN_PORTS] + s["outputs"][:SHOWN_PORTS]
    width = min(40, max((len(p["label"]) for p in shown), default=0))
    lines.extend(_ports("inputs", s["inputs"], width))
    lines.extend(_ports("outputs", s["outputs"], width))
    if s["topScopes"]:
        lines.append("top scopes by ops:")
        width = max(len(_count(t["ops"])) for t in s["topScopes"])
        lines.extend(f"  {_count(t['ops']):>{width}}  {t['scope'] or '(top level)'}" for t in s["topScopes"][:5])
    prims = list(s["primitives"].items())
    if prims:
        shown = ", ".join(f"{p} {c}" for p, c in prims[:TOP_PRIMITIVES])
        more = f", +{len(prims) - TOP_PRIMITIVES} more" if len(prims) > TOP_PRIMITIVES else ""
        lines.append(f"primitives: {shown}{more}")
    if s["complete"]:
        lines.append("coverage: complete, nothing opaque")
    else:
        lines.append(f"coverage: INCOMPLETE, {_plural(len(s['opaque']), 'opaque region')}")
        for o in s["opaque"][:3]:
            lines.append(f"  {o.get('node')}: {o.get('reason')}")
    lines.extend(f"note: {n}" for n in s["notes"][:3])
    if s["effects"]:
        lines.append(f"effects: {', '.join(s['effects'])}")
    return "\n".join(lines)
