"""What ``jaxlsp trace --costs`` / ``--precision`` print and ``jaxlsp/costs`` returns: the cost
table, XLA's whole-program figures beside ours, memory (peak, residuals) and precision, from one
graph (stdlib only)."""

from __future__ import annotations

from typing import Any

from jaxlsp.graph import costs, memory
from jaxlsp.graph.model import Graph
from jaxlsp.graph.precision import precision, render_precision

AGREEMENT = 0.10  # our loop-bodies-once FLOPs and XLA's whole-program FLOPs should agree this well


def analysis_json(graph: Graph) -> dict[str, Any]:
    """Costs by module, totals, XLA's figures when measured, memory, residuals and precision."""
    table = costs.table(graph)
    peak = memory.peak(graph)
    res = memory.residuals(graph)
    out: dict[str, Any] = {
        **table.json(),
        "measurement": dict(graph.costs) if graph.costs else None,
        "memory": peak.json(),
        "residuals": res.json() if res is not None else None,
        "precision": [r.json() for r in precision(graph)],
    }
    return out


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def _gap(ours: int, theirs: int) -> str:
    gap = abs(ours - theirs) / theirs if theirs else (0.0 if not ours else 1.0)
    return f"{100 * gap:.1f}% apart: {'agree' if gap <= AGREEMENT else 'DIFFER'}"


def compare_xla(graph: Graph) -> list[str]:
    """Lines setting XLA's whole-program analysis beside ours, when the trace asked for it. Ours
    adds up each equation lowered alone, before XLA optimises anything: it is compared with the
    analysis of the lowered module (the program as written); the compiled program's figures (after
    fusion, which keeps intermediates out of memory: far fewer bytes) are printed for what runs."""
    xla = (graph.costs or {}).get("xla")
    if not isinstance(xla, dict):
        return []
    if "error" in xla and "flops" not in xla:
        return [f"xla: the whole program could not be analysed: {xla['error']}"]

    def figures(d: dict[str, Any]) -> str:
        return (
            f"{int(d.get('flops', 0))} FLOPs, {int(d.get('bytes', 0))} bytes accessed, "
            f"{int(d.get('transcendentals', 0))} transcendentals"
        )

    once = costs.body_once(graph)
    full = costs.total(graph)
    lines = []
    compiled = xla.get("compiled")
    if xla.get("analysed") == "compiled":  # no analysis before compiling on this platform
        lines.append(f"xla compiled program (no analysis of the lowered one here): {figures(xla)}")
    else:
        lines.append(f"xla lowered program (as written, before optimisation; what ours counts): {figures(xla)}")
        if isinstance(compiled, dict):
            lines.append(f"xla compiled program (optimised and fused; what runs): {figures(compiled)}")
    lines += [
        f"ours, loop bodies once: {once.flops} FLOPs ({_gap(once.flops, int(xla.get('flops', 0)))}), "
        f"{once.bytes} bytes ({_gap(once.bytes, int(xla.get('bytes', 0)))})",
        f"ours, loops multiplied: {full.flops} FLOPs, {full.bytes} bytes",
    ]
    mem = xla.get("memory")
    if isinstance(mem, dict):
        lines.append(
            "xla memory: "
            + ", ".join(f"{k} {_bytes(int(v))}" for k, v in mem.items() if isinstance(v, int) and k != "generatedCode")
        )
    return lines


def render_memory(graph: Graph, limit: int = 8) -> list[str]:
    peak = memory.peak(graph)
    where = f" at {peak.node}" if peak.node else ""
    node = next((n for n in graph.nodes if n.id == peak.node), None)
    if node is not None:
        where += f" ({node.primitive}{', ' + node.scope if node.scope else ''})"
    lines = [
        f"memory: peak {_bytes(peak.bytes)} live{where}, inputs {_bytes(peak.inputs)} of it"
        + (f"; {peak.unsized} values of unknown size not counted" if peak.unsized else "")
    ]
    for scope, size in peak.by_module[:limit]:
        lines.append(f"  {_bytes(size):>10}  {scope or '(outside modules)'}")
    res = memory.residuals(graph)
    if res is not None:
        lines.append(
            f"residuals for the backward pass: {_bytes(res.bytes)} in {len(res.values)} values "
            f"({_bytes(res.input_bytes)} of them inputs)"
        )
        for scope, size, count in res.by_module[:limit]:
            lines.append(f"  {_bytes(size):>10}  {count:>4}  {scope or '(outside modules)'}")
        if res.recomputed_ops:
            flops = f", {res.recomputed_flops} FLOPs" if res.recomputed_flops is not None else ""
            lines.append(f"rematerialized: {res.recomputed_ops} forward ops repeated in the backward pass{flops}")
    return lines


def render_analysis(graph: Graph, costs_: bool = True, precision_: bool = False) -> str:
    """The text ``jaxlsp trace --costs`` (and ``--precision``) prints after the summary."""
    parts: list[str] = []
    if costs_:
        parts.append(costs.render_table(costs.table(graph)))
        parts.extend(compare_xla(graph))
        parts.extend(render_memory(graph))
    if precision_:
        parts.append(render_precision(precision(graph)))
    return "\n".join(parts)
