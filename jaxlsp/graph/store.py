"""Traced graphs kept by the server, by trace id, with paging by group (no pygls here).

A page lists one level of the hierarchy: the nodes directly in a group and its child groups,
collapsed, in program order (a child group appears where its first node does). The store holds
the ``limit`` newest graphs, and past them the newest graph of each target while all it holds
stays within an equation budget: an older graph of a target goes first, then the oldest.
"""

from __future__ import annotations

import contextlib
import math
import os
import uuid
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from jaxlsp.graph import slices
from jaxlsp.graph.diff import GraphDiff, diff_packed
from jaxlsp.graph.model import Frame, Graph, Node, Value
from jaxlsp.graph.packed import Packed
from jaxlsp.graph.report import shape_str

MEMO_LIMIT = 256  # derived answers kept per trace (hover lines)


class NodeSeq(Sequence[Node]):
    """Nodes of a packed graph by row, each made when it is read (a loop's line can hold every
    equation of the graph: its ids and count cost nothing, its nodes one at a time)."""

    def __init__(self, packed: Packed, rows: list[int]) -> None:
        self._packed = packed
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Node: ...

    @overload
    def __getitem__(self, index: slice) -> list[Node]: ...

    def __getitem__(self, index: int | slice) -> Node | list[Node]:
        if isinstance(index, slice):
            return [self._packed.node(i) for i in self.rows[index]]
        return self._packed.node(self.rows[index])

    def __iter__(self) -> Iterator[Node]:
        node = self._packed.node
        return (node(i) for i in self.rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeSeq):
            return self._packed is other._packed and self.rows == other.rows
        return isinstance(other, list) and list(self) == other

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, like a list

    @property
    def ids(self) -> list[str]:
        return [self._packed.node_id(i) for i in self.rows]


class Trace:
    """A kept graph, held packed (:class:`~jaxlsp.graph.packed.Packed`: columns and interned
    tables, a few MB where model objects took hundreds): lookups read indexes over the columns and
    materialise only the nodes and values they answer with. Its paths are as the file spells them
    (relative: workspace files to the base, library files to their ``sys.path`` entry);
    ``meta["roots"]`` (the worker's ``{base, packages}``) resolves them again, and every method
    here takes and gives absolute paths."""

    def __init__(self, id: str, graph: Graph | Packed | dict[str, Any], meta: dict[str, Any]) -> None:
        """``graph``: model objects, a packed graph, or a compact (version 2) object already
        checked by ``io.from_json``."""
        self.id = id
        self.meta = meta  # uri, name, profile, interpreter, roots {base, packages}...
        if isinstance(graph, Packed):
            self.packed = graph
        else:
            self.packed = Packed(graph) if isinstance(graph, dict) else Packed.from_graph(graph)
        # Everything but the nodes and values, as model objects: ports, groups, sections.
        self.info = self.packed.shell()
        self._group_index = {g.id: i for i, g in enumerate(self.info.groups)}
        # A level's entries in program order: a node index, or -1 - k for the child group k.
        self._levels: dict[str | None, array[int]] = {}
        self._tree: tuple[dict[int, array[int]], array[int], dict[int, list[int]]] | None = None
        self._counts: tuple[array[int], array[int]] | None = None
        self._changes: tuple[str, GraphDiff] | None = None  # (the earlier trace's id, the diff from it)
        self._analysis: dict[str, Any] | None = None  # jaxlsp.graph.analysis.analysis_json, once
        # (path as spelled, cell) -> frame depth -> frame index -> indices of the nodes whose first
        # frame in that file it is: a hover looks at one file's frames, not at every node
        self._lines: dict[tuple[str, int | None], dict[int, dict[int, array[int]]]] | None = None
        self.memo: dict[tuple[Any, ...], Any] = {}  # see remember()
        roots = self.meta.get("roots") if isinstance(self.meta.get("roots"), dict) else {}
        base = roots.get("base") if isinstance(roots, dict) else None
        self._base = str(base) if isinstance(base, str) and base else None
        packages = roots.get("packages") if isinstance(roots, dict) else None
        self._packages = {str(k): str(v) for k, v in packages.items()} if isinstance(packages, dict) else {}

    def moved(self, packed: Packed, meta: dict[str, Any]) -> Trace:
        """A new trace of ``packed``, this trace's graph with its positions moved to an edited
        text (live/relocate.py): the indexes over nodes, levels and groups are this trace's (a
        line index holds frame numbers, which the move kept); hover memos and the analysis are
        made anew; the diff from this trace is empty."""
        trace = Trace(uuid.uuid4().hex[:16], packed, meta)
        trace._lines, trace._levels, trace._tree, trace._counts = (
            self.line_index(),
            self._levels,
            self._tree,
            self._counts,
        )
        trace._changes = (self.id, GraphDiff(matched=packed.node_count))
        return trace

    @property
    def graph(self) -> Graph:
        """The whole graph as model objects, made anew on each call (hundreds of MB for a big one,
        gone when the caller drops it): for readers that need every node (analysis, DOT and HTML
        exports, a diff), off the server's loop. Lookups use the methods below."""
        return self.packed.to_graph()

    @contextlib.contextmanager
    def whole(self) -> Iterator[Graph]:
        """:attr:`graph` for the block, let go of a piece at a time at its end
        (:func:`jaxlsp.graph.slices.release`): a 60,000-equation graph dropped at once is one C
        cascade of 55-80 ms holding the GIL, which the event loop waited for while an HTML export
        or a cost table ran in a graph thread (loop watchdog, issue 25)."""
        graph = self.packed.to_graph()
        try:
            yield graph
        finally:
            slices.release(graph)

    # -- the small parts ---------------------------------------------------------------------
    @property
    def node_count(self) -> int:
        return self.packed.node_count

    @property
    def value_count(self) -> int:
        return self.packed.value_count

    @property
    def execution(self) -> dict[str, Any] | None:
        return self.info.execution

    @property
    def contracts(self) -> dict[str, Any] | None:
        return self.info.contracts

    @property
    def time(self) -> dict[str, Any] | None:
        """The measured time section (``jaxlsp trace --time``), read from the small parts: a hover
        asks for it on every line, and :attr:`graph` would make all 60,000 nodes of a big trace
        to read it (1.2-1.6 s of the event loop, measured with the loop watchdog, issue 25)."""
        return self.info.time

    @property
    def sources(self) -> dict[str, str]:
        return self.info.sources

    def set_values(self, stats: list[dict[str, Any] | None], execution: dict[str, Any] | None) -> None:
        """A values run's results: each value's statistics (in value order) and the execution."""
        if len(stats) != self.packed.value_count:
            raise ValueError(f"{len(stats)} statistics for {self.packed.value_count} values")
        for i, item in enumerate(stats):
            self.packed.set_member(i, "stats", item)
        self.info.execution = execution
        self.packed.set_section("execution", execution)
        self._analysis = None

    def stats(self, value_ids: set[str] | None = None) -> dict[str, dict[str, Any] | None]:
        """Each value's statistics by id (None where a values run computed none): of ``value_ids``,
        or of every value."""
        p = self.packed
        rows = (
            range(p.value_count)
            if value_ids is None
            else sorted(i for vid in value_ids if (i := p.value_index(vid)) is not None)
        )
        return {p.value_id(i): p.value(i).stats for i in rows}

    def values_with_stats(self) -> int:
        return len(self.packed.value_extra.get("stats", {}))

    def parameters(self) -> int:
        """Elements of the inputs with role ``parameter`` (``report.summarize``'s ``parameters``)."""
        total = 0
        for port in self.info.inputs:
            v = self.value(port.value) if port.role == "parameter" else None
            if v is not None and all(isinstance(d, int) for d in v.shape):
                total += math.prod(int(d) for d in v.shape)
        return total

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
        return self.key(path) in self.info.sources

    def forget_pages(self) -> None:
        """Drop the memos (their answers carry values' statistics, which changed)."""
        self.memo.clear()

    def remember(self, key: tuple[Any, ...], value: Any) -> None:
        """Keep what a feature derived from this trace alone (a hover's lines), the oldest going
        past :data:`MEMO_LIMIT`; dropped with the trace or when its statistics change."""
        self.memo[key] = value
        while len(self.memo) > MEMO_LIMIT:
            del self.memo[next(iter(self.memo))]

    def node(self, node_id: str) -> Node | None:
        i = self.packed.node_index(node_id)
        return None if i is None else self.packed.node(i)

    def value(self, value_id: str) -> Value | None:
        i = self.packed.value_index(value_id)
        return None if i is None else self.packed.value(i)

    def output_types(self) -> list[str]:
        return [shape_str(v) for p in self.info.outputs if (v := self.value(p.value)) is not None]

    def nodes_at(self, path: str, line: int, cell: int | None = None) -> NodeSeq:
        """Nodes produced at ``path:line`` (1-based; in a notebook, line of ``cell``), innermost first.

        A node belongs to each line of ``path`` that one of its frames there covers: the line
        that wrote the operation, and every call in this file that led to it, so that
        ``x = _block(x, w)`` shows what a helper of the same file computed, as a call into
        another file does (issue 46: 42 of a vision model's 44 body lines were dark). Nodes are
        ordered by their innermost frame at the line, then in program order; each comes once.
        """
        key = ("nodes_at", path, line, cell)
        known: list[int] | None = self.memo.get(key)  # a hover's line, again and again
        if known is None:
            known = []
            frames = self.packed.frames
            taken: set[int] | None = None  # made only when a second depth answers too
            for depth in sorted(by_depth := self.line_index().get((self.key(path), cell), {})):
                here = [rows for f, rows in by_depth[depth].items() if frames[f].line <= line <= frames[f].end_line]
                if not here:
                    continue
                rows = list(here[0]) if len(here) == 1 else sorted({i for rows in here for i in rows})  # program order
                if taken is None:
                    if known:  # a shallower depth answered: a node with two frames here comes once
                        taken = set(known)
                    else:
                        known.extend(rows)
                        continue
                fresh = [i for i in rows if i not in taken]
                taken.update(fresh)
                known.extend(fresh)
            self.remember(key, known)
        return NodeSeq(self.packed, known)

    def lines_with_nodes(self, path: str, cell: int | None = None) -> frozenset[int]:
        """The lines of ``path`` (1-based; of ``cell`` in a notebook) where :meth:`nodes_at`
        answers something: what a hover on a line without a shape compares with (was the
        function called, was the branch taken)."""
        key = ("lines_with_nodes", path, cell)
        known: frozenset[int] | None = self.memo.get(key)
        if known is None:
            frames = self.packed.frames
            spans = {f for by_frame in self.line_index().get((self.key(path), cell), {}).values() for f in by_frame}
            known = frozenset(n for f in spans for n in range(frames[f].line, frames[f].end_line + 1))
            self.remember(key, known)
        return known

    def line_index(self) -> dict[tuple[str, int | None], dict[int, dict[int, array[int]]]]:
        """Each node under each of its frames in workspace files, by file and depth (computed
        once; a new trace's is built off the server's loop, with the trace). Every frame counts,
        not only a file's innermost: the caller's line of a helper in the same file holds the
        helper's nodes too (a frame twice in one stack, recursion, counts once)."""
        if self._lines is None:
            frames = self.packed.frames
            # per distinct stack, computed once: (file key, depth, frame index) of each of its
            # workspace frames
            placed: list[list[tuple[tuple[str, int | None], int, int]]] = []
            for stack in self.packed.stacks:
                seen: set[int] = set()
                entries = []
                for depth, k in enumerate(stack):
                    frame = frames[k]
                    if frame.package is None and k not in seen:
                        seen.add(k)
                        entries.append(((frame.path, frame.cell), depth, k))
                placed.append(entries)
            lines: dict[tuple[str, int | None], dict[int, dict[int, array[int]]]] = {}
            for i, s in enumerate(self.packed.stack):
                for where, depth, k in placed[s]:
                    rows = lines.setdefault(where, {}).setdefault(depth, {}).get(k)
                    if rows is None:
                        rows = lines[where][depth][k] = array("l")
                    rows.append(i)
            self._lines = lines
        return self._lines

    def changes_since(self, before: Trace) -> GraphDiff:
        """What changed from ``before`` (an earlier trace of the same target), computed once."""
        if self._changes is None or self._changes[0] != before.id:
            self._changes = (before.id, diff_packed(before.packed, self.packed))
        return self._changes[1]

    def stale_sources(self, read: Any) -> list[str]:
        """Source files (absolute) whose text now differs from the traced one (``read(absolute
        path) -> str | None``)."""
        import hashlib

        stale = []
        for spelled, digest in self.info.sources.items():
            path = self.resolve(spelled)
            text = read(path)
            if text is None or hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
                stale.append(path)
        return stale

    def analysis(self) -> dict[str, Any]:
        """Costs by module, memory, residuals and precision (``analysis_json``), computed once."""
        if self._analysis is None:
            from jaxlsp.graph.analysis import analysis_json

            with self.whole() as graph:
                self._analysis = analysis_json(graph)
        return self._analysis

    def value_json(self, value_id: str) -> dict[str, Any]:
        i = self.packed.value_index(value_id)
        return {"id": value_id} if i is None else self._value_item(i)

    def _value_item(self, i: int) -> dict[str, Any]:
        v = self.packed.value(i)
        out = {"id": v.id, "shape": list(v.shape), "dtype": v.dtype, "weakType": v.weak_type, "type": shape_str(v)}
        if v.stats is not None:
            out["stats"] = dict(v.stats)
        return out

    def has_level(self, group: str | None) -> bool:
        """Whether :meth:`level` of ``group`` is laid out already (then a page costs little)."""
        return group in self._levels

    def level_entries(self, group: str | None) -> array[int]:
        """One level in program order (cached, a few bytes an entry): a node index, or ``-1 - k``
        for the child group ``k``; raises KeyError for an unknown group."""
        found = self._levels.get(group)
        if found is not None:
            return found
        gi = -1 if group is None else self._group_index.get(group)
        if gi is None:
            raise KeyError(group)
        direct, first, kids = self._index()
        # One level is its own nodes plus each child group where that group's first node is: no
        # scan of the whole graph per level (a 100,000-equation graph has hundreds of levels).
        own = direct.get(gi, array("l"))
        children = sorted((first[k], k) for k in kids.get(gi, []) if first[k] >= 0)
        entries = array("l")
        at = 0
        for position, k in children:  # merge: a group goes before its first node's position
            while at < len(own) and own[at] < position:
                entries.append(own[at])
                at += 1
            entries.append(-1 - k)
        entries.extend(own[at:])
        self._levels[group] = entries
        return entries

    def level(self, group: str | None) -> list[dict[str, Any]]:
        """Every item of one level: nodes in ``group`` and its child groups (made on each call;
        :meth:`items` makes a page of them)."""
        entries = self.level_entries(group)
        return self.items(entries, 0, len(entries))

    def items(self, entries: array[int], start: int, stop: int) -> list[dict[str, Any]]:
        """The page items of ``entries[start:stop]``."""
        counts, children = self.group_counts()
        out = []
        for e in entries[start:stop]:
            if e >= 0:
                out.append(self._node_item(e))
            else:
                k = -1 - e
                owner = self.info.groups[k]
                out.append(
                    {
                        "id": owner.id,
                        "kind": "group",
                        "groupKind": owner.kind,
                        "label": owner.label,
                        "counts": {"nodes": counts[k], "groups": children[k]},
                    }
                )
        return out

    def _parent(self, k: int) -> int:
        parent = self.info.groups[k].parent
        if parent is None:
            return -1
        found = self._group_index.get(parent)
        return -2 if found is None else found  # -2: a dangling parent, no place anywhere

    def _index(self) -> tuple[dict[int, array[int]], array[int], dict[int, list[int]]]:
        """Computed once per trace: node indices by their own group (-1: the top level), each
        group's first node anywhere inside it (-1: none), and the child groups of each group."""
        if self._tree is None:
            groups = self.info.groups
            parents = [self._parent(k) for k in range(len(groups))]
            direct: dict[int, array[int]] = {}
            first = array("l", [-1]) * len(groups)
            column = self.packed.group
            index_of = self._group_of_code
            for i in range(self.packed.node_count):
                gi = index_of(column[i])
                if gi == -2:
                    continue  # a dangling group id: the node has no place on any level
                rows = direct.get(gi)
                if rows is None:
                    rows = direct[gi] = array("l")
                rows.append(i)
                g = gi
                while g >= 0 and first[g] < 0:  # "first[g] < 0": no cycles
                    first[g] = i
                    g = parents[g]
            kids: dict[int, list[int]] = {}
            for k, parent in enumerate(parents):
                if parent != -2:
                    kids.setdefault(parent, []).append(k)
            self._tree = (direct, first, kids)
        return self._tree

    def _group_of_code(self, code: int) -> int:
        """A node's group column entry as an index into the groups (-1 top level, -2 unknown)."""
        if code == -1:
            return -1
        if code < 0:
            return -2
        gid = self.packed.group_ids[code]
        found = self._group_index.get(gid) if isinstance(gid, str) else None
        return -2 if found is None else found

    def group_counts(self) -> tuple[array[int], array[int]]:
        """Nodes anywhere inside each group and its direct child groups, computed once per trace."""
        if self._counts is None:
            groups = self.info.groups
            parents = [self._parent(k) for k in range(len(groups))]
            own = array("l", [0]) * len(groups)
            column = self.packed.group
            for i in range(self.packed.node_count):
                g = self._group_of_code(column[i])
                if g >= 0:
                    own[g] += 1
            nodes = array("l", [0]) * len(groups)
            for k in range(len(groups)):
                g, steps = k, 0
                while g >= 0 and steps <= len(groups):  # steps: a cycle of parents ends
                    nodes[g] += own[k]
                    g, steps = parents[g], steps + 1
            children = array("l", [0]) * len(groups)
            for parent in parents:
                if parent >= 0:
                    children[parent] += 1
            self._counts = (nodes, children)
        return self._counts

    def _node_item(self, i: int) -> dict[str, Any]:
        p = self.packed
        item: dict[str, Any] = {
            "id": p.node_id(i),
            "kind": "node",
            "primitive": p.strings[p.primitive[i]],
            "scope": p.strings[p.scope[i]],
            "outputs": [self.value_json(v) for v in p.outputs(i)],
        }
        src = p.source[i]
        if src >= 0:
            frame = p.frames[src]
            item["source"] = {"path": frame.path, "line": frame.line}
            if frame.cell is not None:  # a notebook's cell: the line counts within it
                item["source"]["cell"] = frame.cell
        return item


class GraphStore:
    """Traces by id: the ``limit`` most recent, and past them the newest of each target (``uri``
    and ``name``) while the kept graphs hold at most ``budget`` equations together and there are
    at most ``targets`` of them. Live shapes trace every target of the open files, and a graph
    that only made room for another target's re-trace took the shapes of the lines only it
    covered (recurrentgemma: 29 live targets, 16 graphs kept, ``Griffin``'s lines went dark).
    ``listeners`` hear of each trace added."""

    def __init__(self, limit: int = 16, budget: int = 320_000, targets: int = 256) -> None:
        self.limit = limit
        self.budget = budget
        self.targets = targets
        self._traces: OrderedDict[str, Trace] = OrderedDict()
        self._equations = 0  # of the kept traces
        self.listeners: list[Callable[[Trace], None]] = []
        self.update_listeners: list[Callable[[Trace], None]] = []  # a kept trace gained statistics

    def add(self, graph: Graph | Packed | dict[str, Any], meta: dict[str, Any]) -> Trace:
        return self.keep(self.build(graph, meta))

    @staticmethod
    def build(graph: Graph | Packed | dict[str, Any], meta: dict[str, Any], before: Trace | None = None) -> Trace:
        """A new trace of ``graph`` with its indexes and, given the target's ``before`` trace, what
        changed since: the costly part of keeping a trace, touching no state of the store (the server
        runs it off its loop, then :meth:`keep` on it)."""
        trace = Trace(uuid.uuid4().hex[:16], graph, meta)
        trace.line_index()
        trace.level_entries(None)
        trace.group_counts()  # what a page's group items say: one pass over the nodes, here
        if before is not None:
            trace.changes_since(before)
        return trace

    def keep(self, trace: Trace) -> Trace:
        """Keep a trace made by :meth:`build` (past ``limit``, an older trace of a target goes
        first, then the oldest once the budget is spent); listeners hear of it."""
        self._traces[trace.id] = trace
        self._equations += trace.node_count
        while len(self._traces) > self.limit:
            victim = self._superseded()
            if victim is None:
                if len(self._traces) <= self.targets and self._equations <= self.budget:
                    break
                victim = next(iter(self._traces))
            self._equations -= self._traces.pop(victim).node_count
        for listener in self.listeners:
            listener(trace)
        return trace

    def _superseded(self) -> str | None:
        """The oldest kept trace of a target that has a newer one kept."""
        seen: set[tuple[Any, Any]] = set()
        oldest = None
        for trace in reversed(self._traces.values()):
            key = (trace.meta.get("uri"), trace.meta.get("name"))
            if key in seen:
                oldest = trace.id
            seen.add(key)
        return oldest

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
        entries = trace.level_entries(group)
        start = int(cursor) if cursor else 0
        if start < 0 or start > len(entries):
            raise ValueError(cursor)
        page: dict[str, Any] = {"items": trace.items(entries, start, start + limit)}
        if start + limit < len(entries):
            page["nextCursor"] = str(start + limit)
        return page
