"""What changed between two traces: nodes added, removed and changed (stdlib only).

Nodes are matched by scope path, primitive and order within their scope: each scope's equations
are aligned in order by primitive (``difflib``, after the common head and tail, which are most of
a re-trace), and an aligned pair is *changed* when its input or output types (shape, dtype) or its
params differ. Ids, source lines, frames, costs and statistics are ignored, so a trace of an edit
that changes nothing but positions gives an empty diff. Region references in params (``{"group":
"g3"}``) and object addresses in opaque reprs are ignored too. Graph inputs and outputs are
compared by label.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from jaxlsp.graph import strict
from jaxlsp.graph.model import Graph, Node, Value
from jaxlsp.graph.packed import Packed
from jaxlsp.graph.report import shape_str, short_dtype

ARROW = "\u2192"  # the summary's "before -> after"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@dataclass
class Change:
    """One aligned pair of nodes that differs: ``fields`` lists (what, before, after)."""

    before: Node
    after: Node
    fields: list[tuple[str, str, str]]

    def describe(self) -> str:
        what, old, new = self.fields[0]
        label = f"{self.after.scope + ' ' if self.after.scope else ''}{self.after.primitive}"
        if what == "outputs":
            return f"{label} {old} {ARROW} {new}"
        return f"{label} {what} {old} {ARROW} {new}"


@dataclass
class PortChange:
    label: str
    before: str | None  # the type, None when added
    after: str | None  # None when removed


@dataclass
class GraphDiff:
    added: list[Node] = field(default_factory=list)  # nodes of the newer graph
    removed: list[Node] = field(default_factory=list)  # nodes of the older graph
    changed: list[Change] = field(default_factory=list)
    inputs: list[PortChange] = field(default_factory=list)
    outputs: list[PortChange] = field(default_factory=list)
    matched: int = 0  # aligned pairs, changed or not

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.changed or self.inputs or self.outputs)

    def summary(self) -> str:
        """``+12 ops; Dense_1 dot_general f32[4,8] → f32[4,16]``; ``no changes`` when the same."""
        counts = []
        if self.added:
            counts.append(f"+{len(self.added)} op{'s' if len(self.added) != 1 else ''}")
        if self.removed:
            counts.append(f"-{len(self.removed)} op{'s' if len(self.removed) != 1 else ''}")
        if self.changed:
            counts.append(f"{len(self.changed)} changed")
        if not counts and (self.inputs or self.outputs):
            counts.append(f"{len(self.inputs) + len(self.outputs)} inputs/outputs changed")
        if not counts:
            return "no changes"
        text = ", ".join(counts)
        first = _most_telling(self.changed)
        if first is not None:
            text += "; " + first.describe()
        elif self.added:
            node = self.added[0]
            text += f"; new {node.scope + ' ' if node.scope else ''}{node.primitive}"
        return text

    def json(self, limit: int = 1000) -> dict[str, Any]:
        def node(n: Node) -> dict[str, Any]:
            return {"id": n.id, "primitive": n.primitive, "scope": n.scope}

        def port(p: PortChange) -> dict[str, Any]:
            return {"label": p.label, "before": p.before, "after": p.after}

        items = len(self.added) + len(self.removed) + len(self.changed)
        return {
            "same": self.same,
            "summary": self.summary(),
            "counts": {
                "added": len(self.added),
                "removed": len(self.removed),
                "changed": len(self.changed),
                "matched": self.matched,
            },
            "added": [node(n) for n in self.added[:limit]],
            "removed": [node(n) for n in self.removed[:limit]],
            "changed": [
                {
                    "id": c.after.id,
                    "baseId": c.before.id,
                    "primitive": c.after.primitive,
                    "scope": c.after.scope,
                    "fields": [{"field": f, "before": b, "after": a} for f, b, a in c.fields],
                    "text": c.describe(),
                }
                for c in self.changed[:limit]
            ],
            "inputs": [port(p) for p in self.inputs],
            "outputs": [port(p) for p in self.outputs],
            "truncated": items > 3 * limit or any(len(x) > limit for x in (self.added, self.removed, self.changed)),
        }


def _most_telling(changes: list[Change]) -> Change | None:
    """The change to name in a summary: the first whose outputs changed, else the first."""
    return next((c for c in changes if c.fields[0][0] == "outputs"), changes[0] if changes else None)


def diff(before: Graph, after: Graph) -> GraphDiff:
    """What changed from ``before`` to ``after``."""
    return _diff(_GraphSide(before), _GraphSide(after))


def diff_packed(before: Packed | Graph, after: Packed | Graph) -> GraphDiff:
    """:func:`diff` where either side may be a packed graph (``jaxlsp.graph.packed``), read
    from its columns: only the nodes the answer names are made as :class:`Node` objects."""
    sa, sb = _side(before), _side(after)
    if isinstance(sa, _PackedSide) and isinstance(sb, _PackedSide) and _same_program(sa.p, sb.p):
        # Every node pairs with its namesake and none differs: what _diff finds, without
        # aligning and comparing a re-trace's every node (0.3 s at 10,000 equations) after an
        # edit that changed no equation (a comment, a docstring, code outside the target).
        inputs, outputs = _ports(sa.inputs, sb.inputs, sa, sb), _ports(sa.outputs, sb.outputs, sa, sb)
        return GraphDiff(inputs=inputs, outputs=outputs, matched=sa.count)
    return _diff(sa, sb)


def _same_program(a: Packed, b: Packed) -> bool:
    """Whether two packed graphs hold the same equations: every column and table the diff reads
    (scopes, primitives, params, inputs and outputs, the values' shapes and dtypes) equal."""
    return (
        a.node_count == b.node_count
        and a.value_count == b.value_count
        and a.strings == b.strings
        and a.names == b.names
        and a.shapes == b.shapes
        and a.params == b.params
        and a.scope == b.scope
        and a.primitive == b.primitive
        and a.param == b.param
        and a.start == b.start
        and a.n_in == b.n_in
        and a.refs == b.refs
        and a.shape == b.shape
        and a.dtype == b.dtype
    )


def _side(graph: Packed | Graph) -> _GraphSide | _PackedSide:
    return _PackedSide(graph) if isinstance(graph, Packed) else _GraphSide(graph)


class _GraphSide:
    """One side of a diff: its nodes by index, their scope, primitive, types and params."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.count = len(graph.nodes)
        self.types = _Types(graph)
        self.inputs, self.outputs = graph.inputs, graph.outputs

    def scope(self, i: int) -> str:
        return self.graph.nodes[i].scope

    def primitive(self, i: int) -> str:
        return self.graph.nodes[i].primitive

    def out_types(self, i: int) -> str:
        return self.types.of(self.graph.nodes[i].outputs)

    def in_types(self, i: int) -> str:
        return self.types.of(self.graph.nodes[i].inputs)

    def params(self, i: int) -> Any:
        return self.graph.nodes[i].params

    def node(self, i: int) -> Node:
        return self.graph.nodes[i]

    def port_type(self, value_id: str) -> str:
        return self.types.of([value_id])


class _PackedSide:
    """:class:`_GraphSide` over a packed graph's columns (types by value, made once per shape and
    dtype, and params once per distinct params object)."""

    def __init__(self, packed: Packed) -> None:
        self.p = packed
        self.count = packed.node_count
        self._texts: dict[tuple[int, int], str] = {}
        self._outs: dict[int, str] = {}
        self._params: dict[int, Any] = {}
        header = packed.header_json()
        self.inputs = [_Port(str(x.get("value")), str(x.get("label"))) for x in header.get("inputs", [])]
        self.outputs = [_Port(str(x.get("value")), str(x.get("label"))) for x in header.get("outputs", [])]

    def scope(self, i: int) -> str:
        return self.p.strings[self.p.scope[i]]

    def primitive(self, i: int) -> str:
        return self.p.strings[self.p.primitive[i]]

    def _type(self, code: int) -> str:
        if code < 0:
            return "?"
        key = (self.p.shape[code], self.p.dtype[code])
        text = self._texts.get(key)
        if text is None:
            shape = self.p.shapes[key[0]]
            text = self._texts[key] = f"{short_dtype(self.p.strings[key[1]])}[{','.join(str(d) for d in shape)}]"
        return text

    def out_types(self, i: int) -> str:
        found = self._outs.get(i)  # asked when aligning and again when comparing
        if found is None:
            p = self.p
            found = self._outs[i] = ", ".join(self._type(c) for c in p.refs[p.start[i] + p.n_in[i] : p.start[i + 1]])
        return found

    def in_types(self, i: int) -> str:
        p = self.p
        return ", ".join(self._type(c) for c in p.refs[p.start[i] : p.start[i] + p.n_in[i]])

    def params(self, i: int) -> Any:
        k = self.p.param[i]
        found = self._params.get(k)
        if found is None:  # as the model holds them: non-finite floats as floats
            found = self._params[k] = strict.json_copy(self.p.params[k], f"tables.params[{k}]")
        return found

    def node(self, i: int) -> Node:
        return self.p.node(i)

    def port_type(self, value_id: str) -> str:
        i = self.p.value_index(value_id)
        return "?" if i is None else self._type(i)


@dataclass
class _Port:
    value: str
    label: str


_Side = _GraphSide | _PackedSide


def _diff(before: _Side, after: _Side) -> GraphDiff:
    out = GraphDiff()
    old_scopes = _by_scope(before)
    new_scopes = _by_scope(after)
    added: list[int] = []
    removed: list[int] = []
    changed: list[tuple[int, int, list[tuple[str, str, str]]]] = []
    for scope in [*new_scopes, *(s for s in old_scopes if s not in new_scopes)]:
        a = old_scopes.get(scope, [])
        b = new_scopes.get(scope, [])
        for x, y in _align(a, b, before, after):
            if x is None and y is not None:
                added.append(y)
            elif y is None and x is not None:
                removed.append(x)
            elif x is not None and y is not None:
                out.matched += 1
                fields = _compare(x, y, before, after)
                if fields:
                    changed.append((x, y, fields))
    out.added = [after.node(i) for i in sorted(added)]
    out.removed = [before.node(i) for i in sorted(removed)]
    changed.sort(key=lambda c: c[1])
    out.changed = [Change(before.node(x), after.node(y), fields) for x, y, fields in changed]
    out.inputs = _ports(before.inputs, after.inputs, before, after)
    out.outputs = _ports(before.outputs, after.outputs, before, after)
    return out


def _by_scope(side: _Side) -> dict[str, list[int]]:
    scopes: dict[str, list[int]] = {}
    scope = side.scope
    for i in range(side.count):
        scopes.setdefault(scope(i), []).append(i)
    return scopes


def _align(a: list[int], b: list[int], sa: _Side, sb: _Side) -> list[tuple[int | None, int | None]]:
    """Pairs of one scope's nodes in order: first by primitive and output types, then, where those
    differ, by primitive alone (a wider layer changes every type but keeps the order of its
    operations; a different activation replaces its operations). Unpaired nodes are added or
    removed."""
    return _align_by(
        a,
        b,
        lambda i: (sa.primitive(i), sa.out_types(i)),
        lambda i: (sb.primitive(i), sb.out_types(i)),
        lambda x, y: _align_by(x, y, sa.primitive, sb.primitive),
    )


def _align_by(
    a: list[int], b: list[int], key_a: Any, key_b: Any, inner: Any = None
) -> list[tuple[int | None, int | None]]:
    ka, kb = [key_a(n) for n in a], [key_b(n) for n in b]
    head = 0
    while head < len(a) and head < len(b) and ka[head] == kb[head]:
        head += 1
    tail = 0
    room = min(len(a), len(b)) - head
    while tail < room and ka[len(a) - 1 - tail] == kb[len(b) - 1 - tail]:
        tail += 1
    pairs: list[tuple[int | None, int | None]] = [(a[i], b[i]) for i in range(head)]
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if mid_a or mid_b:
        matcher = difflib.SequenceMatcher(None, ka[head : len(a) - tail], kb[head : len(b) - tail], False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                pairs.extend(zip(mid_a[i1:i2], mid_b[j1:j2], strict=True))
            elif op == "replace" and inner is not None:
                pairs.extend(inner(mid_a[i1:i2], mid_b[j1:j2]))
            else:
                pairs.extend((x, None) for x in mid_a[i1:i2])
                pairs.extend((None, y) for y in mid_b[j1:j2])
    pairs.extend((a[len(a) - tail + i], b[len(b) - tail + i]) for i in range(tail))
    return pairs


class _Types:
    """Value id -> its type text (``f32[4,8]``), computed once per value."""

    def __init__(self, graph: Graph) -> None:
        self.values: dict[str, Value] = {v.id: v for v in graph.values}
        self.cache: dict[str, str] = {}

    def of(self, ids: list[str]) -> str:
        out = []
        for vid in ids:
            text = self.cache.get(vid)
            if text is None:
                value = self.values.get(vid)
                text = self.cache[vid] = shape_str(value) if value is not None else "?"
            out.append(text)
        return ", ".join(out)


def _compare(a: int, b: int, sa: _Side, sb: _Side) -> list[tuple[str, str, str]]:
    fields: list[tuple[str, str, str]] = []
    outs = (sa.out_types(a), sb.out_types(b))
    if outs[0] != outs[1]:
        fields.append(("outputs", *outs))
    ins = (sa.in_types(a), sb.in_types(b))
    if ins[0] != ins[1]:
        fields.append(("inputs", *ins))
    params_a, params_b = sa.params(a), sb.params(b)
    if params_a != params_b:
        pa, pb = _normal(params_a), _normal(params_b)
        if pa != pb:
            for key in sorted(set(pa) | set(pb)):
                if pa.get(key) != pb.get(key):
                    fields.append((key, _short(pa.get(key)), _short(pb.get(key))))
    return fields


def _normal(value: Any) -> Any:
    """Params without what differs between equal programs: region ids, object addresses."""
    if isinstance(value, dict):
        if len(value) == 1 and "group" in value:
            return {"group": "*"}
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        return _ADDRESS.sub("", value)
    return value


def _short(value: Any, limit: int = 60) -> str:
    text = "absent" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ports(before: list[Any], after: list[Any], sa: _Side, sb: _Side) -> list[PortChange]:
    old = {p.label: sa.port_type(p.value) for p in before}
    new = {p.label: sb.port_type(p.value) for p in after}
    out = []
    for label in [*new, *(k for k in old if k not in new)]:
        if old.get(label) != new.get(label):
            out.append(PortChange(label, old.get(label), new.get(label)))
    return out


def render_diff(d: GraphDiff, limit: int = 30) -> str:
    """The text ``jaxlsp diff`` prints: the summary, then each change."""
    lines = [d.summary()]
    for n in d.added[:limit]:
        lines.append(f"+ {n.scope or '(top level)'}  {n.primitive}  ({n.id})")
    if len(d.added) > limit:
        lines.append(f"+ ... and {len(d.added) - limit} more")
    for n in d.removed[:limit]:
        lines.append(f"- {n.scope or '(top level)'}  {n.primitive}  ({n.id})")
    if len(d.removed) > limit:
        lines.append(f"- ... and {len(d.removed) - limit} more")
    for c in d.changed[:limit]:
        lines.append(f"~ {c.describe()}  ({c.before.id} {ARROW} {c.after.id})")
        lines.extend(f"    {f}: {b} {ARROW} {a}" for f, b, a in c.fields[1:])
    if len(d.changed) > limit:
        lines.append(f"~ ... and {len(d.changed) - limit} more")
    for kind, ports in (("input", d.inputs), ("output", d.outputs)):
        for p in ports:
            lines.append(f"{kind} {p.label}: {p.before or 'absent'} {ARROW} {p.after or 'absent'}")
    return "\n".join(lines)
