"""Memory from the graph alone: the peak of live bytes in evaluation order, and for gradients the
residuals the forward pass keeps for the backward pass (stdlib only).

Liveness walks each program (the top level, each body) in node order. A value is live from the
equation that makes it to the last equation of the same program that reads it (a read inside a
body counts as a read by the equation that owns the body); the graph's inputs and outputs are
live throughout (the caller holds them); a body's value that nothing in the body reads is one of
its results and lives to the body's end. While an equation with bodies runs, its bodies' own peak
(the largest over a cond's branches, a loop body per turn) adds to what is live around it. This is
the program as written, before XLA fuses and reuses buffers: ``--xla-compare`` prints XLA's
compiled ``memory_analysis()`` beside it.

Residuals (``jax.ad_checkpoint.print_saved_residuals``'s view): what the backward equations read
that the forward pass made or the caller passed in. A ``jax.checkpoint`` (``remat``) policy
shows here as fewer residuals and as forward work repeated inside the backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jaxlsp.graph.costs import Regions, figures_of, is_backward, regions
from jaxlsp.graph.model import Graph, Value
from jaxlsp.graph.report import itemsize, num_elements

INPUTS = "(inputs)"  # the module a graph input's bytes are listed under


def value_bytes(value: Value) -> int | None:
    """Bytes of a value (None: a symbolic dimension or an unknown dtype); literals take none."""
    if value.kind == "literal":
        return 0
    n = num_elements(value)
    size = itemsize(value.dtype)
    return None if n is None or size is None else n * size


@dataclass
class Peak:
    """The peak of live bytes: when (the node running then, innermost), what is live, by module."""

    bytes: int
    node: str | None
    live: list[str]  # value ids live at the peak
    by_module: list[tuple[str, int]]  # (scope, bytes) largest first; graph inputs under INPUTS
    inputs: int  # bytes of the graph's inputs (held throughout)
    unsized: int  # values whose size is unknown (symbolic dimensions), counted as 0

    def json(self) -> dict[str, Any]:
        return {
            "peakBytes": self.bytes,
            "node": self.node,
            "live": list(self.live),
            "byModule": [{"scope": s, "bytes": b} for s, b in self.by_module],
            "inputBytes": self.inputs,
            "unsized": self.unsized,
        }


@dataclass
class _Level:
    bytes: int = 0
    node: str | None = None
    live: list[str] = field(default_factory=list)


class _Liveness:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.where: Regions = regions(graph)
        self.values = {v.id: v for v in graph.values}
        self.index = {n.id: i for i, n in enumerate(graph.nodes)}
        owner: dict[str, int] = {}
        for node_id, gids in self.where.owned.items():
            if node_id in self.index:
                for gid in gids:
                    owner[gid] = self.index[node_id]
        self.owner = owner
        self.position = {}  # node index -> position among its region's members
        for members in self.where.members.values():
            for p, i in enumerate(members):
                self.position[i] = p
        self.made_in: dict[str, str | None] = {}  # value -> the region of its producer
        for i, n in enumerate(graph.nodes):
            for o in n.outputs:
                self.made_in[o] = self.where.region[i]
        # the last position in the value's own region at which something reads it
        self.last: dict[str, int] = {}
        for j, n in enumerate(graph.nodes):
            for v in n.inputs:
                if v not in self.made_in:
                    continue
                home = self.made_in[v]
                k: int | None = j
                while k is not None and self.where.region[k] != home:
                    r = self.where.region[k]
                    k = self.owner.get(r) if r is not None else None
                if k is not None:
                    p = self.position[k]
                    if p > self.last.get(v, -1):
                        self.last[v] = p
        self.unsized = sum(1 for v in graph.values if value_bytes(v) is None)
        self._memo: dict[str | None, _Level] = {}

    def size(self, vid: str) -> int:
        v = self.values.get(vid)
        return (value_bytes(v) or 0) if v is not None else 0

    def level(self, region: str | None) -> _Level:
        found = self._memo.get(region)
        if found is not None:
            return found
        members = self.where.members.get(region, [])
        end = len(members) - 1
        spans: list[tuple[int, int, str]] = []  # (birth, death, value)
        if region is None:
            held = [p.value for p in self.graph.inputs]
            outputs = {p.value for p in self.graph.outputs}
            spans += [(-1, max(end, 0), v) for v in dict.fromkeys(held)]
        else:
            outputs = set()
        for p, i in enumerate(members):
            for o in self.graph.nodes[i].outputs:
                # a result (the caller's at the top level, the body's inside one) lives to the end
                result = o in outputs or (region is not None and o not in self.last)
                death = end if result else self.last.get(o, p)
                spans.append((p, max(death, p), o))
        starts: dict[int, list[str]] = {}
        for birth, _, v in spans:
            starts.setdefault(max(birth, 0), []).append(v)
        ends: dict[int, int] = {}
        for _, death, v in spans:
            ends[death] = ends.get(death, 0) + self.size(v)
        best = _Level()
        live = 0
        if not members and spans:  # a program of inputs only
            best = _Level(sum(self.size(v) for _, _, v in spans), None, [v for _, _, v in spans])
        for p, i in enumerate(members):
            live += sum(self.size(v) for v in starts.get(p, []))
            inner = self.inner(self.graph.nodes[i].id)
            here = live + inner.bytes
            if here > best.bytes or best.node is None:
                alive = [v for birth, death, v in spans if birth <= p <= death]
                best = _Level(here, inner.node or self.graph.nodes[i].id, alive + inner.live)
            live -= ends.get(p, 0)
        self._memo[region] = best
        return best

    def inner(self, node_id: str) -> _Level:
        """The peak inside an equation's bodies (the largest of them: branches, cond and body)."""
        best = _Level()
        for gid in self.where.owned.get(node_id, []):
            got = self.level(gid)
            if got.bytes > best.bytes:
                best = got
        return best


def peak(graph: Graph) -> Peak:
    """The peak of live bytes over the whole program (see the module's docstring)."""
    walk = _Liveness(graph)
    top = walk.level(None)
    scopes = _module_of(graph)
    by: dict[str, int] = {}
    for v in dict.fromkeys(top.live):
        by[scopes.get(v, INPUTS)] = by.get(scopes.get(v, INPUTS), 0) + walk.size(v)
    inputs = sum(walk.size(p.value) for p in graph.inputs)
    ranked = sorted(((s, b) for s, b in by.items() if b), key=lambda sb: (-sb[1], sb[0]))
    return Peak(top.bytes, top.node, list(dict.fromkeys(top.live)), ranked, inputs, walk.unsized)


def _module_of(graph: Graph) -> dict[str, str]:
    """Value id -> the scope of the equation that made it (graph inputs are absent)."""
    out: dict[str, str] = {}
    for n in graph.nodes:
        for o in n.outputs:
            out[o] = n.scope
    return out


@dataclass
class Residuals:
    """What the backward pass reads from the forward pass and the inputs, by module."""

    values: list[str]
    bytes: int
    by_module: list[tuple[str, int, int]]  # (scope, bytes, count), largest first; inputs under INPUTS
    input_bytes: int
    recomputed_ops: int  # forward equations a remat repeats inside the backward pass
    recomputed_flops: int | None  # their FLOPs when the graph has costs

    def json(self) -> dict[str, Any]:
        return {
            "values": list(self.values),
            "bytes": self.bytes,
            "byModule": [{"scope": s, "bytes": b, "count": c} for s, b, c in self.by_module],
            "inputBytes": self.input_bytes,
            "recomputedOps": self.recomputed_ops,
            "recomputedFlops": self.recomputed_flops,
        }


def residuals(graph: Graph) -> Residuals | None:
    """The residuals of a gradient graph; None when the graph has no backward pass."""
    backward = [is_backward(n) for n in graph.nodes]
    if not any(backward):
        return None
    values = {v.id: v for v in graph.values}
    made_by: dict[str, int] = {}
    for i, n in enumerate(graph.nodes):
        for o in n.outputs:
            made_by[o] = i
    inputs = {p.value for p in graph.inputs}
    found: dict[str, None] = {}
    for i, n in enumerate(graph.nodes):
        if not backward[i]:
            continue
        for v in n.inputs:
            value = values.get(v)
            if value is None or value.kind == "literal":
                continue
            producer = made_by.get(v)
            if (producer is None and v in inputs) or (producer is not None and not backward[producer]):
                found[v] = None
    scopes = _module_of(graph)
    by: dict[str, list[int]] = {}
    total = input_bytes = 0
    for v in found:
        size = value_bytes(values[v]) or 0
        scope = scopes.get(v, INPUTS)
        entry = by.setdefault(scope, [0, 0])
        entry[0] += size
        entry[1] += 1
        total += size
        if v not in scopes:
            input_bytes += size
    ranked = sorted(((s, b, c) for s, (b, c) in by.items()), key=lambda x: (-x[1], x[0]))
    recomputed = _recomputed(graph, backward)
    flops = None
    if any(n.costs is not None for n in graph.nodes):
        flops = 0
        for i in recomputed:
            costs = graph.nodes[i].costs
            if costs is not None and "runs" in costs:
                flops += figures_of(costs).flops * int(costs["runs"])
    return Residuals(list(found), total, ranked, input_bytes, len(recomputed), flops)


def _recomputed(graph: Graph, backward: list[bool]) -> list[int]:
    """Forward equations repeated inside the backward pass: a ``jax.checkpoint`` body's
    recomputation, which the capture marks with the ``remat`` transform."""
    return [i for i, n in enumerate(graph.nodes) if backward[i] and "remat" in n.transforms]
