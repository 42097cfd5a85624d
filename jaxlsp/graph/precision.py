"""Precision at a glance: floating-point conversions (``convert_element_type`` between float
dtypes: bf16 -> f32 upcasts, f32 -> bf16 downcasts) and the precision settings of every matrix
product (``dot_general``, ``conv_general_dilated``), per module (stdlib only).

A mixed-precision boundary shows as a module with conversions both ways; a silent upcast as an
``f32`` product of ``bf16`` inputs or a ``bf16 -> f32`` conversion where none was meant.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jaxlsp.graph.model import Graph, Node
from jaxlsp.graph.report import short_dtype

PRODUCTS = frozenset({"dot_general", "conv_general_dilated", "ragged_dot", "ragged_dot_general"})
_FLOAT_PREFIXES = ("float", "bfloat")


def is_float(dtype: str) -> bool:
    return dtype.startswith(_FLOAT_PREFIXES)


def conversion(graph_values: dict[str, Any], node: Node) -> str | None:
    """``bf16->f32`` for a conversion between two float dtypes, else None."""
    if node.primitive != "convert_element_type" or not node.inputs or not node.outputs:
        return None
    src, dst = graph_values.get(node.inputs[0]), graph_values.get(node.outputs[0])
    if src is None or dst is None or src.dtype == dst.dtype or not (is_float(src.dtype) and is_float(dst.dtype)):
        return None
    return f"{short_dtype(src.dtype)}->{short_dtype(dst.dtype)}"


def product(graph_values: dict[str, Any], node: Node) -> str | None:
    """``bf16 x bf16 -> f32, precision DEFAULT`` for a matrix product, else None."""
    if node.primitive not in PRODUCTS:
        return None
    ins = [short_dtype(v.dtype) for i in node.inputs[:2] if (v := graph_values.get(i)) is not None]
    outs = [short_dtype(v.dtype) for o in node.outputs[:1] if (v := graph_values.get(o)) is not None]
    setting = _precision(node.params.get("precision"))
    text = f"{' x '.join(ins)} -> {''.join(outs)}, precision {setting}"
    preferred = node.params.get("preferred_element_type")
    if isinstance(preferred, str) and outs and short_dtype(preferred) != outs[0]:
        text += f", accumulate {short_dtype(preferred)}"
    return text


def _precision(value: Any) -> str:
    """``DEFAULT`` for none; ``HIGHEST``; a pair that differs per operand as ``HIGH/DEFAULT``."""
    if value is None:
        return "DEFAULT"
    if isinstance(value, list):
        names = [_precision(v) for v in value]
        return names[0] if len(set(names)) == 1 else "/".join(names)
    text = str(value)
    return text.split(".")[-1] if "." in text else text


@dataclass
class PrecisionRow:
    scope: str
    conversions: Counter[str] = field(default_factory=Counter)
    products: Counter[str] = field(default_factory=Counter)
    nodes: list[str] = field(default_factory=list)  # the conversions' and products' node ids

    def json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "conversions": dict(sorted(self.conversions.items())),
            "products": dict(sorted(self.products.items())),
            "nodes": list(self.nodes),
        }


def precision(graph: Graph) -> list[PrecisionRow]:
    """One row per module (a node's own scope, not its ancestors') that converts between float
    dtypes or multiplies matrices, in order of first appearance."""
    values = {v.id: v for v in graph.values}
    rows: dict[str, PrecisionRow] = {}
    for n in graph.nodes:
        conv = conversion(values, n)
        prod = product(values, n) if conv is None else None
        if conv is None and prod is None:
            continue
        row = rows.get(n.scope)
        if row is None:
            row = rows[n.scope] = PrecisionRow(n.scope)
        if conv is not None:
            row.conversions[conv] += 1
        if prod is not None:
            row.products[prod] += 1
        row.nodes.append(n.id)
    return list(rows.values())


def render_precision(rows: list[PrecisionRow], limit: int = 40) -> str:
    if not rows:
        return "precision: no float conversions and no matrix products"
    totals: Counter[str] = Counter()
    for r in rows:
        totals.update(r.conversions)
    head = "precision: " + (
        ", ".join(f"{k} x{c}" for k, c in sorted(totals.items())) + " conversions" if totals else "no float conversions"
    )
    lines = [head]
    for r in rows[:limit]:
        parts = [f"{k} x{c}" for k, c in sorted(r.conversions.items())]
        parts += [f"{k} x{c}" for k, c in sorted(r.products.items())]
        lines.append(f"  {r.scope or '(outside modules)'}: " + "; ".join(parts))
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more modules")
    return "\n".join(lines)
