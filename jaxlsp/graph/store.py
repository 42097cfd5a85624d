"""Traced graphs kept by the server, by trace id, with paging by group (no pygls here).

A page lists one level of the hierarchy: the nodes directly in a group and its child groups,
collapsed, in program order (a child group appears where its first node does). The store holds
at most ``limit`` graphs; the oldest goes first.
"""

from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jaxlsp.graph.diff import GraphDiff, diff
from jaxlsp.graph.model import Frame, Graph, Node, Value
from jaxlsp.graph.report import shape_str

MEMO_LIMIT = 256  # derived answers kept per trace (hover lines)


@dataclass
class Trace:
    """A kept graph. Its paths are as the file spells them (relative: workspace files to the base,
    library files to their ``sys.path`` entry); ``meta["roots"]`` (the worker's
    ``{base, packages}``) resolves them again, and every method here takes and gives absolute
    paths."""

    id: str
    graph: Graph
    meta: dict[str, Any]  # uri, name, profile, interpreter, roots {base, packages}...
    _levels: dict[str | None, list[dict[str, Any]]] = field(default_factory=dict)
    _values: dict[str, Value] = field(default_factory=dict)
    _nodes: dict[str, Node] = field(default_factory=dict)
    _group_counts: tuple[dict[str, int], dict[str, int]] | None = None
    _tree: tuple[dict[str | None, list[int]], dict[str, int], dict[str | None, list[str]]] | None = None
    _changes: tuple[str, GraphDiff] | None = None  # (the earlier trace's id, the diff from it)
    _analysis: dict[str, Any] | None = None  # jaxlsp.graph.analysis.analysis_json, once
    # (path as spelled, cell) -> (first line, last line, frame depth, node index, node) of the nodes
    # whose innermost workspace frame is there: a hover looks at one file's nodes, not all of them
    _lines: dict[tuple[str, int | None], list[tuple[int, int, int, int, Node]]] | None = None
    memo: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # see remember()

    def __post_init__(self) -> None:
        self._values = {v.id: v for v in self.graph.values}
        self._nodes = {n.id: n for n in self.graph.nodes}
        roots = self.meta.get("roots") if isinstance(self.meta.get("roots"), dict) else {}
        base = roots.get("base") if isinstance(roots, dict) else None
        self._base = str(base) if isinstance(base, str) and base else None
        packages = roots.get("packages") if isinstance(roots, dict) else None
        self._packages = {str(k): str(v) for k, v in packages.items()} if isinstance(packages, dict) else {}

    # -- paths: the graph's spelling <-> absolute ----------------------------------------------
    def resolve(self, path: str, package: str | None = None) -> str:
        """The absolute path of a path as the graph spells it (as is when already absolute, or
        when the trace does not know its roots)."""
        if os.path.isabs(path) or path.startswith("<"):
            return path
        root = self._packages.get(package) if package else self._base
        return os.path.normpath(os.path.join(root, path)) if root else path

    def frame_path(self, frame: Frame) -> str:
        return self.resolve(frame.path, frame.package)

    def key(self, path: str) -> str:
        """How the graph spells the workspace file at the absolute ``path``."""
        if self._base is None or not os.path.isabs(path):
            return path
        return os.path.relpath(os.path.normpath(path), self._base).replace(os.sep, "/")

    def has_source(self, path: str) -> bool:
        """Whether the file at the absolute ``path`` contributed to the graph."""
        return self.key(path) in self.graph.sources

    def forget_pages(self) -> None:
        """Drop the cached levels and memos (their items carry values' statistics, which changed)."""
        self._levels.clear()
        self.memo.clear()

    def remember(self, key: tuple[Any, ...], value: Any) -> None:
        """Keep what a feature derived from this trace alone (a hover's lines), the oldest going
        past :data:`MEMO_LIMIT`; dropped with the trace or when its statistics change."""
        self.memo[key] = value
        while len(self.memo) > MEMO_LIMIT:
            del self.memo[next(iter(self.memo))]

    def node(self, node_id: str) -> Node | None:
        return self._nodes.get(node_id)

    def value(self, value_id: str) -> Value | None:
        return self._values.get(value_id)

    def output_types(self) -> list[str]:
        return [shape_str(v) for p in self.graph.outputs if (v := self._values.get(p.value)) is not None]

    def nodes_at(self, path: str, line: int, cell: int | None = None) -> list[Node]:
        """Nodes produced at ``path:line`` (1-based; in a notebook, line of ``cell``), innermost first.

        A node belongs to the first (innermost) of its frames that lies in ``path``: the line
        that wrote the operation, or the call in this file that led to it.
        """
        key = ("nodes_at", path, line, cell)
        known: list[Node] | None = self.memo.get(key)  # a hover's line, again and again
        if known is None:
            placed = self.line_index().get((self.key(path), cell), [])
            known = [n for first, last, _, _, n in placed if first <= line <= last]  # innermost first
            self.remember(key, known)
        return list(known)  # the caller's to change

    def line_index(self) -> dict[tuple[str, int | None], list[tuple[int, int, int, int, Node]]]:
        """Each node under the first of its frames in each workspace file (computed once; a new
        trace's is built off the server's loop, with the trace)."""
        if self._lines is None:
            lines: dict[tuple[str, int | None], list[tuple[int, int, int, int, Node]]] = {}
            for index, n in enumerate(self.graph.nodes):
                seen: set[str] = set()
                for depth, frame in enumerate(n.frames):
                    if frame.package is None and frame.path not in seen:
                        seen.add(frame.path)
                        lines.setdefault((frame.path, frame.cell), []).append(
                            (frame.line, frame.end_line, depth, index, n)
                        )
            for placed in lines.values():
                placed.sort(key=lambda item: (item[2], item[3]))  # innermost frame first, then program order
            self._lines = lines
        return self._lines

    def changes_since(self, before: Trace) -> GraphDiff:
        """What changed from ``before`` (an earlier trace of the same target), computed once."""
        if self._changes is None or self._changes[0] != before.id:
            self._changes = (before.id, diff(before.graph, self.graph))
        return self._changes[1]

    def stale_sources(self, read: Any) -> list[str]:
        """Source files (absolute) whose text now differs from the traced one (``read(absolute
        path) -> str | None``)."""
        import hashlib

        stale = []
        for spelled, digest in self.graph.sources.items():
            path = self.resolve(spelled)
            text = read(path)
            if text is None or hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
                stale.append(path)
        return stale

    def analysis(self) -> dict[str, Any]:
        """Costs by module, memory, residuals and precision (``analysis_json``), computed once."""
        if self._analysis is None:
            from jaxlsp.graph.analysis import analysis_json

            self._analysis = analysis_json(self.graph)
        return self._analysis

    def value_json(self, value_id: str) -> dict[str, Any]:
        v = self._values.get(value_id)
        if v is None:
            return {"id": value_id}
        out = {"id": v.id, "shape": list(v.shape), "dtype": v.dtype, "weakType": v.weak_type, "type": shape_str(v)}
        if v.stats is not None:
            out["stats"] = dict(v.stats)
        return out

    def has_level(self, group: str | None) -> bool:
        """Whether :meth:`level` of ``group`` is laid out already (then it costs nothing)."""
        return group in self._levels

    def level(self, group: str | None) -> list[dict[str, Any]]:
        """Every item of one level (cached): nodes in ``group`` and its child groups."""
        found = self._levels.get(group)
        if found is not None:
            return found
        groups = {g.id: g for g in self.graph.groups}
        if group is not None and group not in groups:
            raise KeyError(group)
        counts, children = self._counts(groups)
        direct, first, kids = self._index(groups)
        # One level is its own nodes plus each child group where that group's first node is: no
        # scan of the whole graph per level (a 100,000-equation graph has hundreds of levels).
        placed: list[tuple[int, dict[str, Any]]] = [
            (i, self._node_item(self.graph.nodes[i])) for i in direct.get(group, [])
        ]
        for child in kids.get(group, []):
            if child in first:
                owner = groups[child]
                item = {
                    "id": owner.id,
                    "kind": "group",
                    "groupKind": owner.kind,
                    "label": owner.label,
                    "counts": {"nodes": counts.get(child, 0), "groups": children.get(child, 0)},
                }
                placed.append((first[child], item))
        placed.sort(key=lambda entry: entry[0])
        items = [item for _, item in placed]
        self._levels[group] = items
        return items

    def _index(
        self, groups: dict[str, Any]
    ) -> tuple[dict[str | None, list[int]], dict[str, int], dict[str | None, list[str]]]:
        """Computed once per trace: node indices by their own group, each group's first node
        anywhere inside it, and the child groups of each group (None: the top level)."""
        if self._tree is None:
            direct: dict[str | None, list[int]] = {}
            first: dict[str, int] = {}
            for i, n in enumerate(self.graph.nodes):
                if n.group is not None and n.group not in groups:
                    continue  # a dangling group id: the node has no place on any level
                direct.setdefault(n.group, []).append(i)
                gid = n.group
                while gid is not None and gid in groups and gid not in first:  # "not in first": no cycles
                    first[gid] = i
                    gid = groups[gid].parent
            kids: dict[str | None, list[str]] = {}
            for g in self.graph.groups:
                if g.parent is None or g.parent in groups:
                    kids.setdefault(g.parent, []).append(g.id)
            self._tree = (direct, first, kids)
        return self._tree

    def _counts(self, groups: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
        """Nodes anywhere inside each group and its direct child groups, computed once per trace."""
        if self._group_counts is None:
            nodes: dict[str, int] = {}
            for n in self.graph.nodes:
                gid = n.group
                while gid is not None:
                    nodes[gid] = nodes.get(gid, 0) + 1
                    gid = groups[gid].parent if gid in groups else None
            children: dict[str, int] = {}
            for g in self.graph.groups:
                if g.parent is not None:
                    children[g.parent] = children.get(g.parent, 0) + 1
            self._group_counts = (nodes, children)
        return self._group_counts

    def _node_item(self, n: Node) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": n.id,
            "kind": "node",
            "primitive": n.primitive,
            "scope": n.scope,
            "outputs": [self.value_json(v) for v in n.outputs],
        }
        if n.source is not None:
            item["source"] = {"path": n.source.path, "line": n.source.line}
            if n.source.cell is not None:  # a notebook's cell: the line counts within it
                item["source"]["cell"] = n.source.cell
        return item


class GraphStore:
    """The ``limit`` most recent traces by id; ``listeners`` hear of each trace added."""

    def __init__(self, limit: int = 16) -> None:
        self.limit = limit
        self._traces: OrderedDict[str, Trace] = OrderedDict()
        self.listeners: list[Callable[[Trace], None]] = []
        self.update_listeners: list[Callable[[Trace], None]] = []  # a kept trace gained statistics

    def add(self, graph: Graph, meta: dict[str, Any]) -> Trace:
        return self.keep(self.build(graph, meta))

    @staticmethod
    def build(graph: Graph, meta: dict[str, Any], before: Trace | None = None) -> Trace:
        """A new trace of ``graph`` with its indexes and, given the target's ``before`` trace, what
        changed since: the costly part of keeping a trace, touching no state of the store (the server
        runs it off its loop, then :meth:`keep` on it)."""
        trace = Trace(uuid.uuid4().hex[:16], graph, meta)
        trace.line_index()
        if before is not None:
            trace.changes_since(before)
        return trace

    def keep(self, trace: Trace) -> Trace:
        """Keep a trace made by :meth:`build` (the oldest goes past ``limit``); listeners hear of it."""
        self._traces[trace.id] = trace
        while len(self._traces) > self.limit:
            self._traces.popitem(last=False)
        for listener in self.listeners:
            listener(trace)
        return trace

    def touch(self, trace: Trace) -> None:
        """``trace``'s graph changed in place (a values run added statistics): cached pages go."""
        trace.forget_pages()
        for listener in self.update_listeners:
            listener(trace)

    def get(self, trace_id: str) -> Trace | None:
        return self._traces.get(trace_id)

    def latest(self, uri: str, name: str) -> Trace | None:
        """The newest trace of the target ``name`` started from ``uri``."""
        return self.newest_like({"uri": uri, "name": name})

    def newest_like(self, meta: dict[str, Any]) -> Trace | None:
        """The newest kept trace of the target ``meta`` labels (its ``uri`` and ``name``): what
        :meth:`previous` answers for a trace with that label kept next."""
        for trace in reversed(self._traces.values()):
            if trace.meta.get("uri") == meta.get("uri") and trace.meta.get("name") == meta.get("name"):
                return trace
        return None

    def previous(self, trace: Trace) -> Trace | None:
        """The newest trace of the same target (uri and name) added before ``trace``, if kept."""
        found = None
        for other in self._traces.values():
            if other is trace:
                return found
            if other.meta.get("uri") == trace.meta.get("uri") and other.meta.get("name") == trace.meta.get("name"):
                found = other
        return None

    def changes(self, trace: Trace) -> GraphDiff | None:
        """What changed since the target's previous trace (None when there is none), computed once."""
        before = self.previous(trace)
        return None if before is None else trace.changes_since(before)

    def covering(self, path: str) -> list[Trace]:
        """Traces with nodes from ``path``, newest first."""
        return [t for t in reversed(self._traces.values()) if t.has_source(path)]

    def page(self, trace_id: str, group: str | None, cursor: str | None, limit: int) -> dict[str, Any]:
        """``{items, nextCursor?}``: raises KeyError for an unknown trace or group, ValueError for a bad cursor."""
        trace = self._traces.get(trace_id)
        if trace is None:
            raise KeyError(trace_id)
        items = trace.level(group)
        start = int(cursor) if cursor else 0
        if start < 0 or start > len(items):
            raise ValueError(cursor)
        page: dict[str, Any] = {"items": items[start : start + limit]}
        if start + limit < len(items):
            page["nextCursor"] = str(start + limit)
        return page
