"""The compact form (version 2, docs/graph-format.md "Compact form") written: from a version 1
object (:func:`encode`, which checks it) or from the model objects (:func:`encode_graph`, the same
text: the worker's result, ``io.write``, the store of a graph). Also the layout both sides share.

Stdlib only, Python >= 3.10: the capture worker writes this form.

Version 1 spells every node and value as an object and every frame in full: a 60,000-equation
graph is 27 MB of JSON (about 1,350 bytes an equation on a real model, most of it frame stacks
repeated thousands of times) and, read into :mod:`jaxlsp.graph.model` objects, hundreds of MB in
the server. Version 2 is the same graph as columns: every string once in ``tables.strings``,
every distinct frame, frame stack, params object, shape and transform list once in ``tables``,
and per node or value a handful of small integers (indices into them; the values a node reads
and writes as differences from the previous one, which on a chain of equations is ``1,0``).
Optional members of nodes and values that have no column (``costs``, ``literal``, ``stats``,
and whatever later versions add) are kept sparse, as JSON, under ``extra``; top-level sections
other than ``nodes`` and ``values`` are the version 1 ones, unchanged. So :func:`encode` and
:class:`jaxlsp.graph.packed.Packed` pass through members they do not know, and the readers check
every row as they check a version 1 file (:mod:`jaxlsp.graph.expanded_rows`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from jaxlsp.graph import strict
from jaxlsp.graph.expanded_write import jsonable, to_json, value_extras
from jaxlsp.graph.model import COMPACT_VERSION, VALUE_KINDS, Frame, Graph

TABLES = ("strings", "frames", "stacks", "params", "shapes", "transforms")
NODE_COLUMNS = ("primitive", "params", "scope", "group", "source", "frames", "transforms", "inputs", "outputs")
VALUE_COLUMNS = ("shape", "dtype", "flags")  # flags: bit 0 weakType, the rest the index of kind in VALUE_KINDS
FRAME_WIDTH = 8  # path, line, column, endLine, endColumn, function, package, cell
NULL = -1  # a column's null (no group, no source, no producer)
json_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode  # a member's text
# Members of a version 1 node / value that the columns hold; every other member is ``extra``.
_NODE_KEYS = frozenset(
    ("id", "primitive", "params", "inputs", "outputs", "scope", "group", "source", "frames", "transforms")
)
_VALUE_KEYS = frozenset(("id", "shape", "dtype", "weakType", "producer", "kind"))
_FRAME_KEYS = frozenset(("path", "line", "column", "endLine", "endColumn", "function", "package", "cell"))


class _Interned:
    """Distinct items by key, in first-use order."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.items: list[Any] = []

    def add(self, key: Any, item: Any = None) -> int:
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.items)
            self.items.append(key if item is None else item)
        return found


class _Columns:
    """The version 2 form being written: the interned tables and the columns, a node or a value at
    a time, in the order :func:`encode` reads a version 1 object (strings in first-use order: each
    node's primitive, scope and new frames' texts, then the values' dtypes, then irregular ids)."""

    def __init__(self, groups: dict[Any, int], values: dict[Any, int], nodes: dict[Any, int]) -> None:
        self.strings, self.frames, self.stacks, self.params, self.shapes, self.transforms = (
            _Interned() for _ in TABLES
        )
        self.frame_flat: list[int] = []
        self.groups, self.value_index, self.node_index = groups, values, nodes
        self.cols: dict[str, list[Any]] = {name: [] for name in NODE_COLUMNS}
        self.refs: list[int | str] = []
        self.node_extra: dict[str, list[list[Any]]] = {}
        self.implied: dict[int, int] = {}  # value index -> the first node listing it as an output
        self.previous = 0
        self.node_ids: list[str] = []
        self.regular = True
        self.vcols: dict[str, list[int]] = {name: [] for name in VALUE_COLUMNS}
        self.value_extra: dict[str, list[list[Any]]] = {}
        self.value_ids: list[str] = []
        self.vregular = True

    def frame(self, key: tuple[Any, ...]) -> int:
        """The index of a frame (its eight members, :data:`FRAME_WIDTH`), added when new."""
        found = self.frames.index.get(key)
        if found is None:
            add = self.strings.add
            self.frame_flat.extend((add(key[0]), *key[1:5]))
            self.frame_flat.append(NULL if key[5] is None else add(key[5]))
            self.frame_flat.append(NULL if key[6] is None else add(key[6]))
            self.frame_flat.append(NULL if key[7] is None else key[7])
            found = self.frames.add(key)
        return found

    def param(self, params: dict[str, Any]) -> int:
        """The index of a node's params (``params``: its JSON-safe object), added when new."""
        return self.params.add(json_text(params), params) if params else self.params.add("{}", {})

    def head(self, nid: str, primitive: str, params: int, scope: str, group: str | None) -> None:
        """A node's first columns (``params``: the index :meth:`param` gave its params);
        :meth:`tail` its others, once its frames are read (their texts come after its
        primitive's and scope's)."""
        i = len(self.node_ids)
        self.node_ids.append(nid)
        self.regular = self.regular and nid == f"n{i}"
        cols = self.cols
        cols["primitive"].append(self.strings.add(primitive))
        cols["params"].append(params)
        cols["scope"].append(self.strings.add(scope))
        cols["group"].append(NULL if group is None else self.groups.get(group, group))

    def tail(self, source: int, stack: int, transforms: tuple[str, ...], ports: tuple[list[Any], list[Any]]) -> None:
        """The last node's other columns: ``source`` and ``stack`` indices (``NULL``: no source),
        ``ports`` its input and output value ids."""
        i = len(self.node_ids) - 1
        cols = self.cols
        cols["source"].append(source)
        cols["frames"].append(stack)
        cols["transforms"].append(self.transforms.add(transforms))
        refs, index, previous = self.refs, self.value_index, self.previous
        for name, ids in zip(("inputs", "outputs"), ports, strict=True):
            cols[name].append(len(ids))
            for vid in ids:
                r = index.get(vid)
                if r is None:
                    refs.append(vid)  # an id no value has: kept as written (validate.check names it)
                    continue
                refs.append(r - previous)
                previous = r
                if name == "outputs":
                    self.implied.setdefault(r, i)
        self.previous = previous

    def value(self, vid: str, shape: list[Any], dtype: str, weak: bool, kind: str, producer: str | None) -> None:
        i = len(self.value_ids)
        self.value_ids.append(vid)
        self.vregular = self.vregular and vid == f"v{i}"
        vcols = self.vcols
        vcols["shape"].append(self.shapes.add(tuple(shape), list(shape)))
        vcols["dtype"].append(self.strings.add(dtype))
        vcols["flags"].append(int(weak) | VALUE_KINDS.index(kind) << 1)
        code: int | str | None = None if producer is None else self.node_index.get(producer, producer)
        if code != self.implied.get(i):
            self.value_extra.setdefault("producer", []).append([i, code])

    def finish(self, header: dict[str, Any]) -> dict[str, Any]:
        """The compact object: ``header``'s members in their order, ``nodes`` and ``values`` (which
        it must hold, as placeholders) replaced by the columns."""
        out: dict[str, Any] = {}
        for key, item in header.items():
            if key == "nodes":
                out["tables"] = {
                    "strings": self.strings.items,
                    "frames": self.frame_flat,
                    "stacks": [list(k) for k in self.stacks.items],
                    "params": self.params.items,
                    "shapes": self.shapes.items,
                    "transforms": [list(k) for k in self.transforms.items],
                }
                out["nodes"] = {
                    "count": len(self.node_ids),
                    "ids": None if self.regular else [self.strings.add(x) for x in self.node_ids],
                    **{name: self.cols[name] for name in NODE_COLUMNS},
                    "refs": self.refs,
                    "extra": self.node_extra,
                }
            elif key == "values":
                out["values"] = {
                    "count": len(self.value_ids),
                    "ids": None if self.vregular else [self.strings.add(x) for x in self.value_ids],
                    **self.vcols,
                    "extra": self.value_extra,
                }
            else:
                out[key] = item
        out["version"] = COMPACT_VERSION
        if "tables" not in out:
            raise ValueError("nodes: missing")
        if "values" not in out:
            raise ValueError("values: missing")
        out["tables"]["strings"] = self.strings.items  # ids interned after the table was placed
        return out


def encode(data: dict[str, Any]) -> dict[str, Any]:
    """The compact form of a version 1 graph's JSON (:func:`jaxlsp.graph.expanded_write.to_json`); ``ValueError``
    naming the member when a node or value holds something the columns cannot say (a malformed
    version 1 object: read it with ``from_json`` first to learn what)."""

    def s(text: Any, path: str) -> str:
        if type(text) is not str:
            raise ValueError(f"{path}: expected a string, got {strict.kind(text)}")
        return text

    read: dict[int, int] = {}  # id of a frame object already read (alive in ``data``) -> its index
    stacks_read: dict[int, int] = {}  # id of a frames list already read (alive in ``data``) -> its index

    def frame(f: Any, path: str) -> int:
        done = read.get(id(f))
        if done is not None:
            return done
        if type(f) is not dict or not f.keys() <= _FRAME_KEYS:
            raise ValueError(f"{path}: expected a frame object")
        get = f.get
        key: tuple[Any, ...] = (get("path"), get("line"), get("column"), get("endLine"), get("endColumn"))
        key += (get("function"), get("package"), get("cell"))
        if key not in columns.frames.index:
            for name, n in zip(("line", "column", "endLine", "endColumn"), key[1:5], strict=True):
                if type(n) is not int or n < 0:
                    raise ValueError(f"{path}.{name}: expected an integer >= 0, got {strict.kind(n)}")
            if key[7] is not None and (type(key[7]) is not int or key[7] < 0):
                raise ValueError(f"{path}.cell: expected an integer >= 0, got {strict.kind(key[7])}")
            s(key[0], f"{path}.path")
            if key[5] is not None:
                s(key[5], f"{path}.function")
            if key[6] is not None:
                s(key[6], f"{path}.package")
        found = read[id(f)] = columns.frame(key)
        return found

    values_in = strict.array(data.get("values"), "values")
    nodes_in = strict.array(data.get("nodes"), "nodes")
    group_index = {g.get("id"): i for i, g in enumerate(data.get("groups") or []) if isinstance(g, dict)}
    value_index: dict[Any, int] = {}
    for i, v in enumerate(values_in):
        if type(v) is not dict:
            raise ValueError(f"values[{i}]: expected an object, got {strict.kind(v)}")
        value_index.setdefault(v.get("id"), i)
    node_index: dict[Any, int] = {}
    for i, n in enumerate(nodes_in):
        if type(n) is not dict:
            raise ValueError(f"nodes[{i}]: expected an object, got {strict.kind(n)}")
        node_index.setdefault(n.get("id"), i)
    columns = _Columns(group_index, value_index, node_index)

    for i, n in enumerate(nodes_in):
        path = f"nodes[{i}]"
        nid = s(n.get("id"), f"{path}.id")
        primitive = s(n.get("primitive"), f"{path}.primitive")
        p = n.get("params")
        if type(p) is not dict:
            raise ValueError(f"{path}.params: expected an object, got {strict.kind(p)}")
        scope = s(n.get("scope"), f"{path}.scope")
        g = n.get("group")
        if g is not None and type(g) is not str:
            raise ValueError(f"{path}.group: expected a group id or null, got {strict.kind(g)}")
        columns.head(nid, primitive, columns.param(p), scope, g)
        src = n.get("source")
        source = NULL if src is None else frame(src, f"{path}.source")
        stack = strict.array(n.get("frames"), f"{path}.frames")
        done = stacks_read.get(id(stack))
        if done is None:
            done = stacks_read[id(stack)] = columns.stacks.add(
                tuple(frame(f, f"{path}.frames[{k}]") for k, f in enumerate(stack))
            )
        tr = tuple(strict.array(n.get("transforms"), f"{path}.transforms"))
        ports = (strict.array(n.get("inputs"), f"{path}.inputs"), strict.array(n.get("outputs"), f"{path}.outputs"))
        for key, ids in zip(("inputs", "outputs"), ports, strict=True):
            for k, vid in enumerate(ids):
                if vid not in value_index and type(vid) is not str:
                    raise ValueError(f"{path}.{key}[{k}]: expected a value id, got {strict.kind(vid)}")
        columns.tail(source, done, tr, ports)
        if len(n) > len(_NODE_KEYS & n.keys()):
            for key, item in n.items():
                if key not in _NODE_KEYS:
                    columns.node_extra.setdefault(key, []).append([i, item])

    for i, v in enumerate(values_in):
        path = f"values[{i}]"
        vid = s(v.get("id"), f"{path}.id")
        shape = strict.array(v.get("shape"), f"{path}.shape")
        dtype = s(v.get("dtype"), f"{path}.dtype")
        weak, kind = v.get("weakType"), v.get("kind")
        if type(weak) is not bool or kind not in VALUE_KINDS:
            raise ValueError(f"{path}: weakType must be a boolean and kind one of {', '.join(VALUE_KINDS)}")
        producer = v.get("producer")
        if producer is not None and type(producer) is not str:
            raise ValueError(f"{path}.producer: expected a node id or null, got {strict.kind(producer)}")
        columns.value(vid, shape, dtype, weak, kind, producer)
        if len(v) > len(_VALUE_KEYS & v.keys()):
            for key, item in v.items():
                if key not in _VALUE_KEYS:
                    columns.value_extra.setdefault(key, []).append([i, item])
    return columns.finish(data)


def encode_graph(graph: Graph) -> dict[str, Any]:
    """``encode(to_json(graph))``, equal member for member, from the model objects themselves:
    no version 1 object per node and value (the worker's graph of 20,000 equations made 45,000 of
    them, only to be read again), each frame and frame stack read once by identity (the builder
    shares them), and no check of what the types already say."""
    header = to_json(replace(graph, nodes=[], values=[]))
    columns = _Columns(
        {g.id: i for i, g in enumerate(graph.groups)},  # as encode's: the last of a repeated id
        {v.id: i for i, v in reversed(list(enumerate(graph.values)))},
        {n.id: i for i, n in reversed(list(enumerate(graph.nodes)))},
    )
    frame_at: dict[int, int] = {}  # id of a Frame (alive in ``graph``) -> its index
    stack_at: dict[int, int] = {}  # id of a frames list (alive in ``graph``) -> its index

    def frame(f: Frame) -> int:
        found = frame_at.get(id(f))
        if found is None:
            key = (f.path, f.line, f.column, f.end_line, f.end_column, f.function, f.package, f.cell)
            found = frame_at[id(f)] = columns.frame(key)
        return found

    param_at: dict[int, int] = {}  # id of a params object (alive in ``graph``) -> its index

    for n in graph.nodes:
        # the builder gives the nodes of one equation's params one object: its text is made once
        found = param_at.get(id(n.params))
        if found is None:
            found = param_at[id(n.params)] = columns.param(jsonable(n.params))
        columns.head(n.id, n.primitive, found, n.scope, n.group)
        source = NULL if n.source is None else frame(n.source)
        stack = stack_at.get(id(n.frames))
        if stack is None:
            stack = stack_at[id(n.frames)] = columns.stacks.add(tuple(frame(f) for f in n.frames))
        columns.tail(source, stack, tuple(n.transforms), (n.inputs, n.outputs))
        if n.costs is not None:
            columns.node_extra.setdefault("costs", []).append([len(columns.node_ids) - 1, dict(n.costs)])
    for v in graph.values:
        columns.value(v.id, v.shape, v.dtype, v.weak_type, v.kind, v.producer)
        for key, item in value_extras(v):
            columns.value_extra.setdefault(key, []).append([len(columns.value_ids) - 1, item])
    return columns.finish(header)
