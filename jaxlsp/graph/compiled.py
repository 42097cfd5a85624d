"""Reading a graph's ``compiled`` section (``jaxlsp trace --compiled``): the ``collectives:`` line,
the per-module table of FLOPs, bytes and collective bytes, and the per-device memory, as the CLI
prints them and ``jaxlsp/trace`` returns them, and what one line does there (a hover's part).

Stdlib only (the section is written by ``jaxlsp.worker.program.compiled``; its format is in
docs/graph-format.md, "Compiled"). What is measured and what is estimated: the collectives, the
fusions and the per-device shapes are read from XLA's optimised HLO (measured); the program's
FLOPs and bytes are XLA's ``cost_analysis()`` and its memory XLA's ``memory_analysis()``
(measured, per device); the per-module split of FLOPs and bytes is estimated from the HLO's shapes,
and the peak's holders come from a walk of the compiled schedule (estimated). One figure is the
memory of a chip (a device, off the TPU), named ``memory per chip`` everywhere (CLI, hover,
diagnostics): XLA's when the program compiled, with one line saying how the schedule's walk
differs when it does; in its place when the compile failed, the traced program's liveness walk
with the per-device sizes the compiled program gave. A chip's capacity is what XLA lets a program
allocate there (``fit``: the device's own limit, XLA's where measured, else the published HBM).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jaxlsp.graph.model import Graph, Node

SHOWN_COLLECTIVES = 6  # groups named on the collectives line before "+N more"


def size(n: int) -> str:
    """Bytes in binary units: ``512 B``, ``1.0 KiB``, ``3.2 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@dataclass
class CollectiveGroup:
    """The collectives of one kind caused at one line by one module."""

    kind: str
    where: str  # "model.py:8", "" when neither the graph nor the HLO names a line
    scope: str
    count: int = 0
    bytes: int = 0

    def text(self) -> str:
        at = f" at {self.where}" if self.where else ""
        scope = f" {self.scope}" if self.scope else ""
        return f"{self.kind} \u00d7{self.count} ({size(self.bytes)}){at}{scope}"


def groups(section: dict[str, Any]) -> list[CollectiveGroup]:
    """The section's collectives grouped by kind, line and module, in program order."""
    out: dict[tuple[str, str, str], CollectiveGroup] = {}
    for c in section.get("collectives") or []:
        source = c.get("source")
        where = f"{source['path']}:{source['line']}" if source else ""
        key = (str(c["kind"]), where, str(c.get("scope", "")))
        group = out.get(key)
        if group is None:
            group = out[key] = CollectiveGroup(*key)
        group.count += 1
        group.bytes += int(c.get("bytes", 0))
    return list(out.values())


def collectives_line(graph: Graph) -> str:
    """``collectives: all-reduce \u00d71 (1.0 KiB) at model.py:8 Dense_0; all-gather \u00d72 ...``, or
    ``collectives: none``; says why when the graph was not compiled or the compile failed."""
    section = graph.compiled
    if section is None:
        return "collectives: not measured (trace with --compiled)"
    if section.get("error"):
        return f"collectives: unknown, the compile failed: {section['error']}"
    found = groups(section)
    if not found:
        return "collectives: none"
    shown = "; ".join(g.text() for g in found[:SHOWN_COLLECTIVES])
    more = f"; +{len(found) - SHOWN_COLLECTIVES} more" if len(found) > SHOWN_COLLECTIVES else ""
    return f"collectives: {shown}{more}"


def module_rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in section.get("modules") or []]


def render_table(section: dict[str, Any], limit: int = 20) -> list[str]:
    """The per-module table: module, FLOPs, bytes, collective bytes (per device, estimated)."""
    rows = module_rows(section)
    if not rows:
        return []
    head = ["module", "FLOPs", "bytes", "collective bytes"]
    body = [
        [r["scope"] or "(whole program)", f"{r['flops']:,}", f"{r['bytes']:,}", f"{r['collectiveBytes']:,}"]
        for r in rows[:limit]
    ]
    widths = [max(len(line[k]) for line in [head, *body]) for k in range(len(head))]
    lines = []
    for cells in [head, *body]:
        lines.append(
            "  ".join([cells[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])
        )
    if len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more modules")
    return lines


def unit_of(section: dict[str, Any]) -> str:
    """``chip`` on a TPU (a pod's or a real one), else ``device``: the one name of the figure."""
    return "chip" if section.get("topology") or section.get("platform") == "tpu" else "device"


def xla_memory(section: dict[str, Any]) -> int | None:
    """XLA's memory of one device: arguments + outputs + temporaries - aliased (``memory_analysis()``)."""
    memory = section.get("memory")
    if not memory:
        return None
    total = int(memory.get("argument", 0)) + int(memory.get("output", 0)) + int(memory.get("temp", 0))
    return total - int(memory.get("alias", 0))


def memory_figure(section: dict[str, Any]) -> int | None:
    """The memory per chip (device) every view names: XLA's, else the compiled schedule's peak."""
    total = xla_memory(section)
    if total is not None:
        return total
    peak = section.get("peak")
    return int(peak["bytes"]) if peak else None


def memory_lines(section: dict[str, Any]) -> list[str]:
    """``memory per chip: ...`` (XLA's figure and its parts), what holds the compiled schedule's
    peak by module, and one line on how the two differ when they do (by more than 1 %)."""
    lines: list[str] = []
    name = f"memory per {unit_of(section)}"
    memory, total = section.get("memory"), xla_memory(section)
    if memory and total is not None:
        lines.append(
            f"{name}: {size(total)} (XLA: arguments {size(int(memory.get('argument', 0)))}"
            f" + outputs {size(int(memory.get('output', 0)))} + temporaries {size(int(memory.get('temp', 0)))}"
            + (f" - aliased {size(int(memory['alias']))}" if memory.get("alias") else "")
            + ")"
        )
    peak = section.get("peak")
    if peak:
        holders = ", ".join(f"{m['scope'] or '(top level)'} {size(int(m['bytes']))}" for m in peak["byModule"][:5])
        at = f" at {peak['at']}" if peak.get("at") else ""
        walked = int(peak["bytes"])
        if total is None:
            lines.append(f"{name}: {size(walked)} (the compiled schedule's peak{at}): {holders}")
            return lines
        lines.append(f"held at the compiled schedule's peak{at}: {holders}")
        if abs(walked - total) > 0.01 * max(total, 1):
            more = "more" if walked > total else "less"
            lines.append(
                f"the schedule's walk peaks at {size(walked)}, {more} than XLA's {size(total)}: it keeps each "
                "buffer from its definition to its last use, where XLA's buffer assignment shares, aliases and "
                f"lays them out; the {name} is XLA's"
            )
    return lines


def traced_peak(graph: Graph) -> tuple[int, list[tuple[str, int]], int]:
    """The liveness walk of the traced program (jaxlsp.graph.memory) with each value at its size
    on one device where the compiled program gave it (``values``' ``perDevice``), else whole:
    ``(peak bytes, by module, values sized per device)``. What the peak is without XLA's schedule
    (a compile that failed: every value whole)."""
    from jaxlsp.graph import memory

    shapes = (graph.compiled or {}).get("values") or {}
    values = [
        dataclasses.replace(v, shape=list(shapes[v.id]["perDevice"])) if v.id in shapes else v for v in graph.values
    ]
    found = memory.peak(dataclasses.replace(graph, values=values))
    return found.bytes, found.by_module, sum(1 for v in graph.values if v.id in shapes)


def _traced_peak_line(graph: Graph) -> str:
    total, by_module, sized = traced_peak(graph)
    holders = ", ".join(f"{scope or '(top level)'} {size(b)}" for scope, b in by_module[:5])
    how = f"{sized} value(s) at their compiled per-device size" if sized else "every value whole"
    name = f"memory per {unit_of(graph.compiled or {})}"
    return f"{name}, estimated (the traced program's liveness walk; {how}): {size(total)}: {holders}"


def render(graph: Graph) -> str:
    """What ``jaxlsp trace --compiled`` prints after the summary."""
    section = graph.compiled
    if section is None:
        return collectives_line(graph)
    lines = [collectives_line(graph)]
    if section.get("error"):
        lines.append(_traced_peak_line(graph))
        return "\n".join(lines)
    devices = section.get("devices", 1)
    mesh = (section.get("mesh") or {}).get("axes")
    shape = " (" + ", ".join(f"{k}={v}" for k, v in mesh.items()) + ")" if mesh else ""
    fusions = int(section.get("fusionCount", len(section.get("fusions") or [])))
    pod = section.get("topology")
    target = f"the TPU topology {pod['name']}: {devices} {pod.get('deviceKind') or 'TPU'} device(s)" if pod else ""
    target = target or f"{devices} {section['platform']} device(s)"
    lines.append(f"compiled for {target}{shape}: {fusions} fused kernel(s)")
    fit_line = fit_text(section)
    if fit_line:
        lines.append(fit_line)
    costs = section.get("costs")
    if costs:
        lines.append(
            f"costs per device (XLA): {costs.get('flops', 0):,} FLOPs, {costs.get('bytes', 0):,} bytes accessed, "
            f"{costs.get('transcendentals', 0):,} transcendentals"
        )
    lines.extend(memory_lines(section))
    if memory_figure(section) is None:  # neither XLA nor the schedule said: the traced estimate
        lines.append(_traced_peak_line(graph))
    table = render_table(section)
    if table:
        lines.append("per module, one device (estimated from the compiled HLO):")
        lines.extend("  " + line for line in table)
    seconds = section.get("seconds") or {}
    if seconds:
        order = [k for k in ("lower", "compile", "read", "map") if k in seconds] + sorted(
            k for k in seconds if k not in ("lower", "compile", "read", "map")
        )
        lines.append("compile: " + ", ".join(f"{k} {float(seconds[k]):.2f}s" for k in order))
    return "\n".join(lines)


def fit_text(section: dict[str, Any]) -> str | None:
    """``fits a chip: needs ... of the 15.75 GiB a chip can allocate (...), headroom ...`` or the
    does-not-fit answer, in the same words (worker/program/fit.py writes both)."""
    verdict = section.get("fit")
    if not verdict:
        return None
    if verdict.get("message") or not verdict.get("fits"):
        return str(verdict.get("message") or "does not fit a chip")
    hbm, need = int(verdict["hbm"]), int(verdict["need"])  # a graph written before fit's message
    return f"fits a chip: needs {size(need)} of the {size(hbm)} a chip can allocate, headroom {size(hbm - need)}"


def at_line(section: dict[str, Any] | None, nodes: Sequence[Node]) -> list[str]:
    """What the compiled program does at a line whose traced operations are ``nodes`` (a hover):
    what it communicates (``all-reduce 2.0 MiB over 16 chips``, the collectives mapped to those
    operations, or XLA's frames at their line) and its share of the memory of one chip (device):
    the buffers it makes and the inputs it reads that are live at the compiled schedule's peak.
    When the program did not fit a topology's chip: the inputs and values it holds there, against
    the need XLA named. Empty without a compiled section, or with nothing of the line in it."""
    if not section or not nodes:
        return []
    ids = {n.id for n in nodes}
    where = {(n.source.path, n.source.line) for n in nodes if n.source is not None}
    pod = section.get("topology")
    unit = unit_of(section)
    devices = f"{section.get('devices', 1)} {section['platform']} devices"
    head = f"**on {pod['name']}**" if pod else f"**compiled** ({devices})"
    verdict = section.get("fit") or {}
    if section.get("error"):
        if verdict.get("fits") is not False:
            return []
        held = [h for h in verdict.get("held") or [] if (h.get("path"), h.get("line")) in where]
        need = verdict.get("need")
        said = str(verdict.get("message") or "does not fit a chip").split("; ")[0]  # the figures, not the holders
        lines = ["", f"{head}: {said}"]
        for h in held:
            share = f", {_percent(int(h['bytes']), int(need))} of the need" if need else ""
            whole = "per chip" if h.get("kind") == "input" else "whole"
            lines.append(f"- holds `{h['label']}` {size(int(h['bytes']))} {whole}{share}")
        return lines
    lines = []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for c in section.get("collectives") or []:
        source = c.get("source") or {}
        if ids.intersection(c.get("nodes") or ()) or (source.get("path"), source.get("line")) in where:
            by_kind.setdefault(str(c["kind"]), []).append(c)
    for kind, found in by_kind.items():
        count = f" \u00d7{len(found)}" if len(found) > 1 else ""
        moved = sum(int(c.get("bytes", 0)) for c in found)
        lines.append(f"- communicates: `{kind}`{count} {size(moved)} over {_over(found[0], section, unit)}")
    peak = section.get("peak") or {}
    total = int(peak.get("bytes", 0))
    if total:
        outputs = {v for n in nodes for v in n.outputs}
        inputs = {v for n in nodes for v in n.inputs} - outputs
        made = read = 0
        for held in peak.get("values") or []:
            if held.get("kind") == "argument":
                read += int(held["bytes"]) if held.get("value") in inputs else 0
            elif ids.intersection(held.get("nodes") or ()) or held.get("value") in outputs:
                made += int(held["bytes"])
        if made or read:
            parts = [f"made here {size(made)}"] if made else []
            parts += [f"inputs read here {size(read)}"] if read else []
            lines.append(
                f"- memory per {unit}: {_percent(made + read, total)} of the buffers held at the compiled schedule's"
                f" peak ({', '.join(parts)})"
            )
    return ["", head, *lines] if lines else []


def _percent(part: int, whole: int) -> str:
    share = 100 * part / whole
    return f"{share:.0f} %" if share >= 1 else "under 1 %"


def _over(collective: dict[str, Any], section: dict[str, Any], unit: str) -> str:
    """``16 chips``, or ``4 chips (4 groups)`` when the devices communicate in separate groups."""
    groups_ = collective.get("replicaGroups") or []
    count = len(groups_[0]) if groups_ and groups_[0] else int(section.get("devices", 1))
    apart = f" ({len(groups_)} groups)" if len(groups_) > 1 else ""
    return f"{count} {unit}{'s' if count != 1 else ''}{apart}"


def summary_json(graph: Graph) -> dict[str, Any] | None:
    """The compiled program's part of ``jaxlsp/trace``'s result: the ``collectives:`` line, the
    rendered lines, the collectives' groups and the per-module rows. None when not compiled."""
    section = graph.compiled
    if section is None:
        return None
    out: dict[str, Any] = {"collectives": collectives_line(graph), "text": render(graph).split("\n")}
    if section.get("fit"):
        out["fit"] = section["fit"]
    if section.get("error"):
        out["error"] = str(section["error"])
        return out
    out["groups"] = [
        {"kind": g.kind, "where": g.where, "scope": g.scope, "count": g.count, "bytes": g.bytes}
        for g in groups(section)
    ]
    out["modules"] = module_rows(section)
    peak = section.get("peak")
    if peak:
        out["peakBytes"] = int(peak["bytes"])
    out["devices"] = int(section.get("devices", 1))
    return out
