"""Measured time: the graph's ``time`` section (``jaxlsp trace --time``), its attribution of each
HLO op's device time to graph nodes, and what readers make of it: seconds per node, source line
and module, the table the CLI prints and the line hover shows.

Stdlib only, Python >= 3.10: the capture worker calls :func:`section` with what the profiler
measured (``jaxlsp.worker.program.timing``), and readers (the CLI, hover, the viewer) read the
section alone.

How the time is attributed:

- the profiler gives each HLO instruction that ran its device time (self time: a ``while``'s
  body is its own ops'; ops running at the same instant share it), summed over the runs; a
  program sharded over several devices gives each device's, and the figures here are per step
  and per device (averaged over the devices);
- an instruction maps to the graph nodes its metadata names (``jaxlsp.worker.program.hlo``); a
  fusion maps to the nodes of every instruction it fuses;
- an instruction that maps to several nodes splits its time over them by their FLOPs (the node's
  ``costs``, XLA's figures for the equation alone), by bytes accessed where none has FLOPs
  (copies, transposes), evenly where neither is known. This split is an estimate: the profiler
  times a fused kernel as one;
- an instruction XLA inserted to convert, copy or re-lay a value (a ``wrapped_convert`` of a bf16
  input on the CPU, a TPU's ``copy-start``/``copy-done`` prefetch of a weight), which names no
  equation, counts with the equation whose value it moves when the HLO says which (its ``via``);
- an instruction that maps to no node is *not attributed*; the section says how much that is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from jaxlsp.graph.costs import ROLLED_UP
from jaxlsp.graph.model import Graph, Node

SPLIT_NOTE = (
    "a fusion's time (or that of an op several equations lowered to) is split over its nodes by their FLOPs "
    "(bytes where none has FLOPs): an estimate, the profiler times a fused kernel as one"
)
OUTSIDE = "(outside modules)"
UNATTRIBUTED = "(not attributed)"
IDLE = "(idle: no op running)"
LINES_SHOWN = 10  # source lines in the CLI's table


@dataclass
class Op:
    """One HLO instruction that ran: its device seconds per step (per device) and its nodes."""

    name: str
    opcode: str
    seconds: float
    count: int  # profiler events, all runs and devices
    nodes: list[str]
    via: str = ""  # a value op's: the instruction whose value it moves, whose nodes it took


def weights(nodes: list[Node]) -> list[float]:
    """How an op's time splits over ``nodes``: by FLOPs, else bytes, else evenly."""
    for key in ("flops", "bytes"):
        got = [float((n.costs or {}).get(key, 0) or 0) for n in nodes]
        if sum(got) > 0:
            return got
    return [1.0] * len(nodes)


def split(graph: Graph, ops: list[Op]) -> dict[str, float]:
    """Seconds per node id: each op's seconds over its nodes (:func:`weights`). A call-like or
    control-flow node beside nodes of its body gets none: its figures are its body's."""
    by_id = {n.id: n for n in graph.nodes}
    out: dict[str, float] = {}
    for op in ops:
        nodes = [by_id[i] for i in op.nodes if i in by_id]
        if not nodes or op.seconds <= 0:
            continue
        leaves = [n for n in nodes if n.primitive not in ROLLED_UP]
        nodes = leaves or nodes
        w = weights(nodes)
        total = sum(w)
        for node, part in zip(nodes, w, strict=True):
            out[node.id] = out.get(node.id, 0.0) + op.seconds * part / total
    return out


def _prefixes(scope: str) -> list[str]:
    parts = [p for p in scope.split("/") if p]
    return ["/".join(parts[: k + 1]) for k in range(len(parts))] or [""]


def section(
    graph: Graph,
    ops: list[Op],
    *,
    step: float,
    steps: list[float],
    busy: float,
    compile_seconds: float,
    repeat: int,
    warmup: int,
    device: str,
    devices: int,
    timeline: str,
    notes: list[str],
) -> dict[str, Any]:
    """The graph's ``time`` section (docs/graph-format.md "Time") from the measured ops; seconds
    are per step and per device."""
    per_node = split(graph, ops)
    by_id = {n.id: n for n in graph.nodes}
    lines: dict[tuple[str, int, int | None], float] = {}
    modules: dict[str, float] = {}
    for nid, seconds in per_node.items():
        node = by_id[nid]
        if node.source is not None:
            key = (node.source.path, node.source.line, node.source.cell)
            lines[key] = lines.get(key, 0.0) + seconds
        for scope in _prefixes(node.scope):
            modules[scope] = modules.get(scope, 0.0) + seconds
    attributed = sum(per_node.values())
    ran = [op for op in ops if op.seconds > 0]
    moved = [op for op in ran if op.via and op.nodes]
    if moved:
        named = ", ".join(op.name for op in sorted(moved, key=lambda o: -o.seconds)[:3])
        notes = [
            f"{len(moved)} ops XLA inserted to convert or copy a value ({named}{', ...' if len(moved) > 3 else ''}: "
            f"{duration(sum(op.seconds for op in moved))}) count with the equations whose values they move "
            "(an input's: the equations that read it)",
            *notes,
        ]
    out: dict[str, Any] = {
        "platform": device.split(":", 1)[0],  # cpu, cuda
        "device": device,
        "devices": devices,
        "timeline": timeline,
        "repeat": repeat,
        "warmup": warmup,
        "step": step,
        "steps": list(steps),
        "compile": compile_seconds,
        "busy": busy,
        "attributed": attributed,
        "split": "flops",
        "nodes": {nid: per_node[nid] for nid in sorted(per_node, key=lambda i: -per_node[i])},
        "lines": [
            {"path": path, "line": line, **({} if cell is None else {"cell": cell}), "seconds": seconds}
            for (path, line, cell), seconds in sorted(lines.items(), key=lambda kv: -kv[1])
        ],
        "modules": [
            {"module": scope, "seconds": seconds}
            for scope, seconds in sorted(modules.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "ops": [
            {
                "name": op.name,
                "opcode": op.opcode,
                "seconds": op.seconds,
                "count": op.count,
                "nodes": list(op.nodes),
                **({"via": op.via} if op.via else {}),
            }
            for op in sorted(ran, key=lambda o: -o.seconds)
        ],
        "notes": [SPLIT_NOTE, *notes],
        "phases": {},
    }
    return out


# --------------------------------------------------------------------------------------------
# Readers


def duration(seconds: float) -> str:
    """``12.4 ms``, ``830 µs``, ``1.25 s``."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def percent(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.0f} %" if whole > 0 else "-"


def device_view(time: dict[str, Any]) -> bool:
    """Whether shares read of device-busy time first: on an accelerator (a TPU, a GPU) the step is
    mostly idle for a small model (1.1 ms with 111 µs busy on a v5e chip), and a share of the step
    says 5 % of a line that is half the chip's work. The CPU keeps shares of the step, where busy
    is about the step."""
    return str(time.get("platform") or "cpu") != "cpu"


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(row[k]) for row in [head, *body]) for k in range(len(head))]
    return [
        "  ".join(
            [cells[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))]
        ).rstrip()
        for cells in [head, *body]
    ]


def _shares(seconds: float, time: dict[str, Any], busy_part: bool = True) -> list[str]:
    """The share cells of a row: of the step; on a device, of busy time first (``-`` for a row
    outside busy time, the idle one)."""
    step = percent(seconds, float(time["step"]))
    if not device_view(time):
        return [step]
    return [percent(seconds, float(time["busy"])) if busy_part else "-", step]


def _share_heads(time: dict[str, Any]) -> list[str]:
    return ["of busy", "of step"] if device_view(time) else ["share"]


@dataclass
class Row:
    label: str
    seconds: float


def rows(time: dict[str, Any]) -> list[Row]:
    """The modules that share the step, without overlap, largest first: the children of the
    deepest module holding every timed node (a Linen model's ``MLP`` holds all: its layers are the
    rows), that module's own ops and what lies outside every module; then the ops no node was
    attributed, and the part of the step no op ran (dispatch, the host's and the OS's delays).
    The rows add up to the step: all but the last to the device's busy time."""
    modules = {m["module"]: float(m["seconds"]) for m in time.get("modules", [])}
    scopes = [s for s in modules if s]
    top = [s for s in scopes if "/" not in s]
    prefix = ""
    while len(top) == 1 and any(s.startswith(top[0] + "/") for s in scopes):
        prefix = top[0]
        depth = prefix.count("/") + 2
        top = [s for s in scopes if s.startswith(prefix + "/") and s.count("/") + 1 == depth]
    out = [Row(s, modules[s]) for s in top]
    inside = sum(modules[s] for s in top)
    if prefix:
        own = modules[prefix] - inside
        if own > 0:
            out.append(Row(f"{prefix} (its own ops)", own))
        inside = modules[prefix]
    outside = float(time.get("attributed", 0.0)) - inside
    if outside > 1e-12:
        out.append(Row(OUTSIDE, outside))
    rest = float(time.get("busy", 0.0)) - float(time.get("attributed", 0.0))
    out.sort(key=lambda r: (-r.seconds, r.label))
    if rest > 1e-12:
        out.append(Row(UNATTRIBUTED, rest))
    idle = float(time.get("step", 0.0)) - float(time.get("busy", 0.0))
    if idle > 1e-12:
        out.append(Row(IDLE, idle))
    return out


def headline(time: dict[str, Any]) -> str:
    """``time: step 12.4 ms (wall clock, mean of 5 runs after a warm-up; compiled in 1.20 s);
    device busy 12.1 ms (98 % of the step), 99 % of it attributed to the graph's nodes``."""
    step = float(time["step"])
    busy = float(time["busy"])
    per = f" per device, {time['devices']} devices" if int(time.get("devices", 1)) > 1 else ""
    return (
        f"time: step {duration(step)} (wall clock, mean of {time['repeat']} runs after "
        f"{'a warm-up' if int(time.get('warmup', 1)) == 1 else str(time.get('warmup')) + ' warm-ups'}; "
        f"compiled in {duration(float(time['compile']))}); device busy {duration(busy)}{per} "
        f"({percent(busy, step)} of the step), {percent(float(time['attributed']), busy)} of it attributed "
        "to the graph's nodes"
    )


def line_label(entry: dict[str, Any]) -> str:
    """``model.py:12``; a notebook cell's ``nb.ipynb:cell 3:12``."""
    cell = entry.get("cell")
    return f"{entry['path']}{'' if cell is None else f':cell {cell}'}:{entry['line']}"


def render_lines(time: dict[str, Any], limit: int = LINES_SHOWN) -> list[str]:
    """The table ``line  time  share``: the source lines that took the most device time, largest
    first, share of the step (on a device: of busy time, then of the step), so that a plain
    function's time reads by line as a model's does by module."""
    entries = [e for e in time.get("lines", []) if float(e.get("seconds", 0.0)) > 0]
    if not entries:
        return []
    entries.sort(key=lambda e: -float(e["seconds"]))
    body = [
        [line_label(e), duration(float(e["seconds"])), *_shares(float(e["seconds"]), time)] for e in entries[:limit]
    ]
    if len(entries) > limit:
        rest = sum(float(e["seconds"]) for e in entries[limit:])
        body.append([f"... {len(entries) - limit} more lines", duration(rest), *_shares(rest, time)])
    return _table(["line", "time", *_share_heads(time)], body)


def render(time: dict[str, Any], limit: int = 40) -> str:
    """The headline and the table ``module  time  share`` (share of the step; on a device, share
    of busy time first and of the step beside it), its rows adding up to the step (:func:`rows`),
    the idle part one row of its own; the top source lines (:func:`render_lines`); the costliest
    HLO ops not attributed; the notes."""
    table = rows(time)
    body = [[r.label, duration(r.seconds), *_shares(r.seconds, time, r.label != IDLE)] for r in table[:limit]]
    if len(table) > limit:
        rest = sum(r.seconds for r in table[limit:])
        some_busy = any(r.label != IDLE for r in table[limit:])
        body.append([f"... {len(table) - limit} more", duration(rest), *_shares(rest, time, some_busy)])
    total = sum(r.seconds for r in table)
    body.append(["total", duration(total), *_shares(total, time, busy_part=False)])
    out = [headline(time), *_table(["module", "time", *_share_heads(time)], body)]
    by_line = render_lines(time)
    if by_line:
        out.append("")
        out.extend(by_line)
    missing = [op for op in time.get("ops", []) if not op.get("nodes")]
    if missing:
        named = ", ".join(f"{op['name']} {duration(float(op['seconds']))}" for op in missing[:5])
        out.append(
            f"not attributed: {named}{' ...' if len(missing) > 5 else ''} (HLO ops no equation's metadata names)"
        )
    out.extend(f"note: {n}" for n in time.get("notes", []))
    return "\n".join(out)


def seconds_of(time: dict[str, Any], node_ids: list[str]) -> float:
    """The measured seconds per step of these nodes."""
    per = time.get("nodes", {})
    return sum(float(per.get(i, 0.0)) for i in set(node_ids))


def hover_line(time: dict[str, Any] | None, node_ids: list[str]) -> str | None:
    """``time: 12.4 ms · 31 % of the step (measured, 5 runs)`` for a line's nodes; None when the
    graph was not timed or nothing at the line took time."""
    if not time:
        return None
    seconds = seconds_of(time, node_ids)
    if seconds <= 0 or not math.isfinite(seconds):
        return None
    step = float(time.get("step", 0.0))
    of_step = f"{percent(seconds, step)} of the step"
    if device_view(time):
        of_step = f"{percent(seconds, float(time.get('busy', 0.0)))} of device busy time, {of_step}"
    return f"time: {duration(seconds)} · {of_step} (measured, {time.get('repeat')} runs)"


def instructions_of(time: dict[str, Any] | None, node_id: str) -> list[dict[str, Any]]:
    """The HLO instructions that ran for a node (``name``, ``opcode``, ``seconds``, ``count``)."""
    if not time:
        return []
    return [op for op in time.get("ops", []) if node_id in op.get("nodes", [])]
