"""The compact graph file (version 2, docs/graph-format.md "Compact form") and the packed graph
the server keeps (stdlib only, Python >= 3.10: the worker writes this form).

Version 1 spells every node and value as an object and every frame in full: a 60,000-equation
graph is 27 MB of JSON (about 1,350 bytes an equation on a real model, most of it frame stacks
repeated thousands of times) and, read into :mod:`jaxlsp.graph.model` objects, hundreds of MB in
the server. Version 2 is the same graph as columns: every string once in ``tables.strings``,
every distinct frame, frame stack, params object, shape and transform list once in ``tables``,
and per node or value a handful of small integers (indices into them; the values a node reads
and writes as differences from the previous one, which on a chain of equations is ``1,0``).
Optional members of nodes and values that have no column (``costs``, ``literal``, ``stats``,
and whatever later versions add) are kept sparse, as JSON, under ``extra``; top-level sections
other than ``nodes`` and ``values`` are the version 1 ones, unchanged. So ``encode`` and
:class:`Packed` pass through members they do not know, and :mod:`jaxlsp.graph.io`'s readers
check every row as they check a version 1 file. :func:`encode` writes that form from a version 1
object (checking it); :func:`encode_graph`, the same text, from the model objects (the worker's
result, ``io.write``, the store of a graph).

:class:`Packed` holds one graph as those columns (``array`` integers, the interned tables, the
sparse members as JSON text) and gives back what is asked for: one node or value as a model
object, the expanded (version 1) JSON streamed a row at a time, the whole :class:`Graph` for the
rare reader that needs everything. :class:`CompactFile` checks a worker's compact object as
``io.from_json`` would and gives the file ``io.write`` would write of it, without the model
objects (``jaxlsp trace -o``).
"""

from __future__ import annotations

import copy
import json
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jaxlsp.graph import collector, io
from jaxlsp.graph.model import COMPACT_VERSION, FORMAT, VERSION, Frame, Graph, Node, Value

if TYPE_CHECKING:  # the worker imports this module: the report's only when a summary is made
    from jaxlsp.graph.report import Rows

TABLES = ("strings", "frames", "stacks", "params", "shapes", "transforms")
NODE_COLUMNS = ("primitive", "params", "scope", "group", "source", "frames", "transforms", "inputs", "outputs")
VALUE_COLUMNS = ("shape", "dtype", "flags")
FRAME_WIDTH = 8  # path, line, column, endLine, endColumn, function, package, cell
# Members of a version 1 node / value that the columns hold; every other member is ``extra``.
_NODE_KEYS = frozenset(
    ("id", "primitive", "params", "inputs", "outputs", "scope", "group", "source", "frames", "transforms")
)
_VALUE_KEYS = frozenset(("id", "shape", "dtype", "weakType", "producer", "kind"))
# The order version 1 writes optional members in (io._node_json, io._value_json); unknown ones follow.
_NODE_EXTRA_ORDER = ("costs",)
_VALUE_EXTRA_ORDER = ("literal", "perDevice", "globalShape", "stats")
_KINDS = io.VALUE_KINDS  # flags: bit 0 weakType, the rest the index of kind
_NULL = -1  # a column's null (no group, no source, no producer)
_TEXT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


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


# --------------------------------------------------------------------------------------------
# version 1 JSON or a Graph -> version 2 JSON


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
            self.frame_flat.append(_NULL if key[5] is None else add(key[5]))
            self.frame_flat.append(_NULL if key[6] is None else add(key[6]))
            self.frame_flat.append(_NULL if key[7] is None else key[7])
            found = self.frames.add(key)
        return found

    def param(self, params: dict[str, Any]) -> int:
        """The index of a node's params (``params``: its JSON-safe object), added when new."""
        return self.params.add(_TEXT(params), params) if params else self.params.add("{}", {})

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
        cols["group"].append(_NULL if group is None else self.groups.get(group, group))

    def tail(self, source: int, stack: int, transforms: tuple[str, ...], ports: tuple[list[Any], list[Any]]) -> None:
        """The last node's other columns: ``source`` and ``stack`` indices (``_NULL``: no source),
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
        vcols["flags"].append(int(weak) | _KINDS.index(kind) << 1)
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
    """The compact form of a version 1 graph's JSON (:func:`jaxlsp.graph.io.to_json`); ``ValueError``
    naming the member when a node or value holds something the columns cannot say (a malformed
    version 1 object: read it with ``from_json`` first to learn what)."""

    def s(text: Any, path: str) -> str:
        if type(text) is not str:
            raise ValueError(f"{path}: expected a string, got {io._kind(text)}")
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
                    raise ValueError(f"{path}.{name}: expected an integer >= 0, got {io._kind(n)}")
            if key[7] is not None and (type(key[7]) is not int or key[7] < 0):
                raise ValueError(f"{path}.cell: expected an integer >= 0, got {io._kind(key[7])}")
            s(key[0], f"{path}.path")
            if key[5] is not None:
                s(key[5], f"{path}.function")
            if key[6] is not None:
                s(key[6], f"{path}.package")
        found = read[id(f)] = columns.frame(key)
        return found

    values_in = io._list(data.get("values"), "values")
    nodes_in = io._list(data.get("nodes"), "nodes")
    group_index = {g.get("id"): i for i, g in enumerate(data.get("groups") or []) if isinstance(g, dict)}
    value_index: dict[Any, int] = {}
    for i, v in enumerate(values_in):
        if type(v) is not dict:
            raise ValueError(f"values[{i}]: expected an object, got {io._kind(v)}")
        value_index.setdefault(v.get("id"), i)
    node_index: dict[Any, int] = {}
    for i, n in enumerate(nodes_in):
        if type(n) is not dict:
            raise ValueError(f"nodes[{i}]: expected an object, got {io._kind(n)}")
        node_index.setdefault(n.get("id"), i)
    columns = _Columns(group_index, value_index, node_index)

    for i, n in enumerate(nodes_in):
        path = f"nodes[{i}]"
        nid = s(n.get("id"), f"{path}.id")
        primitive = s(n.get("primitive"), f"{path}.primitive")
        p = n.get("params")
        if type(p) is not dict:
            raise ValueError(f"{path}.params: expected an object, got {io._kind(p)}")
        scope = s(n.get("scope"), f"{path}.scope")
        g = n.get("group")
        if g is not None and type(g) is not str:
            raise ValueError(f"{path}.group: expected a group id or null, got {io._kind(g)}")
        columns.head(nid, primitive, columns.param(p), scope, g)
        src = n.get("source")
        source = _NULL if src is None else frame(src, f"{path}.source")
        stack = io._list(n.get("frames"), f"{path}.frames")
        done = stacks_read.get(id(stack))
        if done is None:
            done = stacks_read[id(stack)] = columns.stacks.add(
                tuple(frame(f, f"{path}.frames[{k}]") for k, f in enumerate(stack))
            )
        tr = tuple(io._list(n.get("transforms"), f"{path}.transforms"))
        ports = (io._list(n.get("inputs"), f"{path}.inputs"), io._list(n.get("outputs"), f"{path}.outputs"))
        for key, ids in zip(("inputs", "outputs"), ports, strict=True):
            for k, vid in enumerate(ids):
                if vid not in value_index and type(vid) is not str:
                    raise ValueError(f"{path}.{key}[{k}]: expected a value id, got {io._kind(vid)}")
        columns.tail(source, done, tr, ports)
        if len(n) > len(_NODE_KEYS & n.keys()):
            for key, item in n.items():
                if key not in _NODE_KEYS:
                    columns.node_extra.setdefault(key, []).append([i, item])

    for i, v in enumerate(values_in):
        path = f"values[{i}]"
        vid = s(v.get("id"), f"{path}.id")
        shape = io._list(v.get("shape"), f"{path}.shape")
        dtype = s(v.get("dtype"), f"{path}.dtype")
        weak, kind = v.get("weakType"), v.get("kind")
        if type(weak) is not bool or kind not in _KINDS:
            raise ValueError(f"{path}: weakType must be a boolean and kind one of {', '.join(_KINDS)}")
        producer = v.get("producer")
        if producer is not None and type(producer) is not str:
            raise ValueError(f"{path}.producer: expected a node id or null, got {io._kind(producer)}")
        columns.value(vid, shape, dtype, weak, kind, producer)
        if len(v) > len(_VALUE_KEYS & v.keys()):
            for key, item in v.items():
                if key not in _VALUE_KEYS:
                    columns.value_extra.setdefault(key, []).append([i, item])
    return columns.finish(data)


def encode_graph(graph: Graph) -> dict[str, Any]:
    """``encode(io.to_json(graph))``, equal member for member, from the model objects themselves:
    no version 1 object per node and value (the worker's graph of 20,000 equations made 45,000 of
    them, only to be read again), each frame and frame stack read once by identity (the builder
    shares them), and no check of what the types already say."""
    header = io.to_json(replace(graph, nodes=[], values=[]))
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

    jsonable = io._jsonable
    param_at: dict[int, int] = {}  # id of a params object (alive in ``graph``) -> its index

    for n in graph.nodes:
        # the builder gives the nodes of one equation's params one object: its text is made once
        found = param_at.get(id(n.params))
        if found is None:
            found = param_at[id(n.params)] = columns.param(jsonable(n.params))
        columns.head(n.id, n.primitive, found, n.scope, n.group)
        source = _NULL if n.source is None else frame(n.source)
        stack = stack_at.get(id(n.frames))
        if stack is None:
            stack = stack_at[id(n.frames)] = columns.stacks.add(tuple(frame(f) for f in n.frames))
        columns.tail(source, stack, tuple(n.transforms), (n.inputs, n.outputs))
        if n.costs is not None:
            columns.node_extra.setdefault("costs", []).append([len(columns.node_ids) - 1, dict(n.costs)])
    for v in graph.values:
        columns.value(v.id, v.shape, v.dtype, v.weak_type, v.kind, v.producer)
        for key, item in io.value_extras(v):
            columns.value_extra.setdefault(key, []).append([len(columns.value_ids) - 1, item])
    return columns.finish(header)


_FRAME_KEYS = frozenset(("path", "line", "column", "endLine", "endColumn", "function", "package", "cell"))


# --------------------------------------------------------------------------------------------
# version 2 JSON -> columns (checked)


def _ints(data: Any, path: str, count: int | None, low: int, high: int | None) -> array[int]:
    """A column: a list of ``count`` integers from ``low`` to ``high`` (inclusive, None: no bound)."""
    items = io._list(data, path)
    if count is not None and len(items) != count:
        raise io._fail(path, f"expected {count} entries (the count), got {len(items)}")
    try:
        if any(type(x) is not int for x in items):
            raise TypeError
        column = array("q", items)
    except (TypeError, OverflowError):
        at = next(i for i, x in enumerate(items) if type(x) is not int or not -(2**63) <= x < 2**63)
        raise io._fail(f"{path}[{at}]", f"expected an integer, got {io._kind(items[at])}") from None
    if column:
        lo, hi = min(column), max(column)
        if lo < low or (high is not None and hi > high):
            at = next(i for i, x in enumerate(column) if x < low or (high is not None and x > high))
            bound = f"from {low} to {high}" if high is not None else f">= {low}"
            raise io._fail(f"{path}[{at}]", f"expected an index {bound}, got {column[at]}")
    return column


def _refs(data: Any, path: str, names: list[str], known: dict[str, int], size: int) -> array[int]:
    """A column of references: an index, ``-1`` for null, or an id no row has (kept in ``names``,
    coded ``-2 - k``)."""
    items = io._list(data, path)
    column = array("q", bytes(8 * len(items)))
    for i, x in enumerate(items):
        if type(x) is int:
            if not _NULL <= x < size:
                raise io._fail(f"{path}[{i}]", f"expected an index from -1 to {size - 1}, got {x}")
            column[i] = x
        elif x is None:
            column[i] = _NULL
        elif type(x) is str and x:
            column[i] = _name(x, names, known)
        else:
            raise io._fail(f"{path}[{i}]", f"expected an index, null or an id, got {io._kind(x)}")
    return column


def _name(text: str, names: list[str], known: dict[str, int]) -> int:
    found = known.get(text)
    if found is None:
        found = known[text] = len(names)
        names.append(text)
    return -2 - found


def _sparse(data: Any, path: str, size: int) -> dict[str, dict[int, str]]:
    """``extra``: member name -> ``[[row, member's JSON], ...]``, kept as JSON text by row."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise io._fail(path, f"expected an object, got {io._kind(data)}")
    out: dict[str, dict[int, str]] = {}
    for key, pairs in data.items():
        where = f"{path}.{key}"
        rows: dict[int, str] = {}
        for k, pair in enumerate(io._list(pairs, where)):
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int or not 0 <= pair[0] < size:
                raise io._fail(f"{where}[{k}]", f"expected [row (0 to {size - 1}), member]")
            try:
                rows[pair[0]] = _TEXT(pair[1])
            except (TypeError, ValueError) as exc:
                raise io._fail(f"{where}[{k}][1]", f"not a JSON value: {exc}") from None
        out[key] = rows
    return out


def _columns(data: Any, path: str, keys: tuple[str, ...]) -> tuple[dict[str, Any], int]:
    d = io._obj(data, path, ("count", "ids", *keys, "extra"), ())
    count = io._int(d["count"], f"{path}.count", 0)
    return d, count


class Packed:
    """One graph held as columns (read from a version 2 object, checked; rows are checked again,
    by :mod:`jaxlsp.graph.io`, when they are materialised)."""

    def __init__(self, data: Any) -> None:
        if not isinstance(data, dict):
            raise io._fail("", f"expected an object, got {io._kind(data)}")
        d = data
        if d.get("format") != FORMAT or d.get("version") != COMPACT_VERSION:
            raise io._fail("version", f"expected a {FORMAT} version {COMPACT_VERSION} object")
        for key in ("tables", "nodes", "values"):
            if key not in d:
                raise io._fail("", f"missing key {key!r}")
        t = io._obj(d["tables"], "tables", TABLES, ())
        self._tables = t  # as read: small (each distinct string, frame, shape... once); written back as is
        self.strings: list[str] = io._strs(t["strings"], "tables.strings")
        top = len(self.strings) - 1
        flat = _ints(t["frames"], "tables.frames", None, _NULL, None)
        if len(flat) % FRAME_WIDTH:
            raise io._fail("tables.frames", f"expected {FRAME_WIDTH} integers per frame, got {len(flat)} in all")
        self.frame_json: list[dict[str, Any]] = []
        self.frames: list[Frame] = []
        for k in range(len(flat) // FRAME_WIDTH):
            where = f"tables.frames[{k * FRAME_WIDTH}:{(k + 1) * FRAME_WIDTH}]"
            p, line, column, end_line, end_column, fn, package, cell = flat[k * FRAME_WIDTH : (k + 1) * FRAME_WIDTH]
            for name, index in (("path", p), ("function", fn), ("package", package)):
                if index > top or (name == "path" and index < 0):
                    raise io._fail(where, f"{name}: expected an index into tables.strings, got {index}")
            f: dict[str, Any] = {"path": self.strings[p], "line": line, "column": column}
            f["endLine"], f["endColumn"] = end_line, end_column
            if fn >= 0:
                f["function"] = self.strings[fn]
            if package >= 0:
                f["package"] = self.strings[package]
            if cell >= 0:
                f["cell"] = cell
            self.frame_json.append(f)
            self.frames.append(io._frame_fast(f) or io._frame(f, where))
        nframes = len(self.frames)
        self.stacks: list[tuple[int, ...]] = [
            tuple(_ints(s, f"tables.stacks[{k}]", None, 0, nframes - 1))
            for k, s in enumerate(io._list(t["stacks"], "tables.stacks"))
        ]
        self.params: list[Any] = io._list(t["params"], "tables.params")
        for k, p in enumerate(self.params):
            if not isinstance(p, dict):
                raise io._fail(f"tables.params[{k}]", f"expected an object, got {io._kind(p)}")
        self.shapes: list[list[Any]] = [
            io._shape(s, f"tables.shapes[{k}]") for k, s in enumerate(io._list(t["shapes"], "tables.shapes"))
        ]
        self.transforms: list[list[str]] = [
            io._strs(s, f"tables.transforms[{k}]") for k, s in enumerate(io._list(t["transforms"], "tables.transforms"))
        ]
        # Ids no row has (a dangling reference, as written), coded -2 - k in reference columns.
        self.names: list[str] = []
        known: dict[str, int] = {}

        nd, n = _columns(d["nodes"], "nodes", (*NODE_COLUMNS, "refs"))
        vd, m = _columns(d["values"], "values", VALUE_COLUMNS)
        self.node_count, self.value_count = n, m
        self.node_ids = (
            None if nd["ids"] is None else [self.strings[i] for i in _ints(nd["ids"], "nodes.ids", n, 0, top)]
        )
        self.value_ids = (
            None if vd["ids"] is None else [self.strings[i] for i in _ints(vd["ids"], "values.ids", m, 0, top)]
        )
        self.primitive = _ints(nd["primitive"], "nodes.primitive", n, 0, top)
        self.param = _ints(nd["params"], "nodes.params", n, 0, len(self.params) - 1)
        self.scope = _ints(nd["scope"], "nodes.scope", n, 0, top)
        self.groups_json = [g for g in io._list(d.get("groups", []), "groups")]
        group_ids = [g.get("id") if isinstance(g, dict) else None for g in self.groups_json]
        self.group = _refs(nd["group"], "nodes.group", self.names, known, len(group_ids))
        if len(self.group) != n:
            raise io._fail("nodes.group", f"expected {n} entries (the count), got {len(self.group)}")
        self.group_ids: list[Any] = group_ids
        self.source = _ints(nd["source"], "nodes.source", n, _NULL, nframes - 1)
        self.stack = _ints(nd["frames"], "nodes.frames", n, 0, len(self.stacks) - 1)
        self.transform = _ints(nd["transforms"], "nodes.transforms", n, 0, len(self.transforms) - 1)
        n_in = _ints(nd["inputs"], "nodes.inputs", n, 0, None)
        n_out = _ints(nd["outputs"], "nodes.outputs", n, 0, None)
        # refs: absolute value indices (or -2 - k for an id no value has), node i's inputs at
        # start[i]:start[i] + n_in[i], its outputs after them up to start[i + 1]
        self.n_in = n_in
        self.start = array("q", [0]) * (n + 1)
        total = 0
        for i in range(n):
            total += n_in[i] + n_out[i]
            self.start[i + 1] = total
        raw = io._list(nd["refs"], "nodes.refs")
        if len(raw) != total:
            raise io._fail("nodes.refs", f"expected {total} entries (the nodes' inputs and outputs), got {len(raw)}")
        self.refs = array("q", bytes(8 * total))
        previous = 0
        for k, r in enumerate(raw):
            if type(r) is int:
                previous += r
                if not 0 <= previous < m:
                    raise io._fail(f"nodes.refs[{k}]", f"refers to value {previous}, not from 0 to {m - 1}")
                self.refs[k] = previous
            elif type(r) is str and r:
                self.refs[k] = _name(r, self.names, known)
            else:
                raise io._fail(f"nodes.refs[{k}]", f"expected an integer or a value id, got {io._kind(r)}")
        self.node_extra = _sparse(nd["extra"], "nodes.extra", n)

        self.shape = _ints(vd["shape"], "values.shape", m, 0, len(self.shapes) - 1)
        self.dtype = _ints(vd["dtype"], "values.dtype", m, 0, top)
        self.flags = _ints(vd["flags"], "values.flags", m, 0, 2 * len(_KINDS) - 1)
        self.value_extra = _sparse(vd["extra"], "values.extra", m)
        self.producer = array("q", [_NULL]) * m
        for i in range(n - 1, -1, -1):  # the first node listing a value as an output
            for k in range(self.start[i] + n_in[i], self.start[i + 1]):
                if self.refs[k] >= 0:
                    self.producer[self.refs[k]] = i
        self._producer_extra = self.value_extra.get("producer", {})  # written back as read
        for row, text in self.value_extra.pop("producer", {}).items():
            code = json.loads(text)
            if code is None:
                self.producer[row] = _NULL
            elif type(code) is int and 0 <= code < n:
                self.producer[row] = code
            elif type(code) is str and code:
                self.producer[row] = _name(code, self.names, known)
            else:
                raise io._fail(
                    f"values.extra.producer (row {row})", f"expected a node index, null or an id, got {text}"
                )
        # Everything else, as version 1 spells it (versions, target, ..., groups, costs, ...).
        self.header: dict[str, Any] = {key: item for key, item in d.items() if key not in ("tables", "nodes", "values")}
        self._order = [key for key in d if key != "tables"]
        self._shell: Graph | None = None
        self._params: dict[int, Any] = {}  # tables.params as the model holds them, by index
        self._node_index: dict[str, int] | None = None
        self._value_index: dict[str, int] | None = None

    @classmethod
    def from_graph(cls, graph: Graph) -> Packed:
        packed = cls(encode_graph(graph))
        packed._shell = copy.deepcopy(replace(graph, nodes=[], values=[]))  # as given, not read again
        return packed

    def relocated(self, frame_json: list[dict[str, Any]], flat: list[int], header: dict[str, Any]) -> Packed:
        """This graph with other frames (``frame_json``, the same count, and ``tables.frames`` as
        ``flat``) and another header (ids, groups and sections as this one's; graph/relocate.py).
        The columns and tables are shared, read only; what a values run sets later (members,
        sections) is this copy's own."""
        if len(frame_json) != len(self.frames) or len(flat) != len(frame_json) * FRAME_WIDTH:
            raise ValueError("a relocated graph has as many frames as its original")
        out = copy.copy(self)
        out._tables = {**self._tables, "frames": flat}
        out.frame_json = frame_json
        out.frames = [
            io._frame_fast(f) or io._frame(f, f"tables.frames[{k * FRAME_WIDTH}]") for k, f in enumerate(frame_json)
        ]
        out.header = header
        out.groups_json = list(header.get("groups", []))
        out._order = list(self._order)
        out.node_extra = {key: dict(rows) for key, rows in self.node_extra.items()}
        out.value_extra = {key: dict(rows) for key, rows in self.value_extra.items()}
        out._shell = None
        return out

    # -- ids ------------------------------------------------------------------------------------
    def node_id(self, i: int) -> str:
        return f"n{i}" if self.node_ids is None else self.node_ids[i]

    def value_id(self, i: int) -> str:
        return f"v{i}" if self.value_ids is None else self.value_ids[i]

    def _ref_id(self, code: int, ids: list[str] | None, prefix: str) -> str:
        if code < 0:
            return self.names[-2 - code]
        return f"{prefix}{code}" if ids is None else ids[code]

    def node_index(self, node_id: str) -> int | None:
        return _find(node_id, self.node_ids, "n", self.node_count, self, "_node_index")

    def value_index(self, value_id: str) -> int | None:
        return _find(value_id, self.value_ids, "v", self.value_count, self, "_value_index")

    def group_of(self, i: int) -> str | None:
        code = self.group[i]
        if code == _NULL:
            return None
        return self.names[-2 - code] if code < 0 else self.group_ids[code]

    def inputs(self, i: int) -> list[str]:
        return [self._ref_id(c, self.value_ids, "v") for c in self.refs[self.start[i] : self.start[i] + self.n_in[i]]]

    def outputs(self, i: int) -> list[str]:
        a, b = self.start[i] + self.n_in[i], self.start[i + 1]
        return [self._ref_id(c, self.value_ids, "v") for c in self.refs[a:b]]

    def output_indices(self, i: int) -> list[int]:
        return [c for c in self.refs[self.start[i] + self.n_in[i] : self.start[i + 1]] if c >= 0]

    # -- rows as version 1 JSON and as model objects ---------------------------------------------
    def node_json(self, i: int, frame_refs: bool = False) -> dict[str, Any]:
        """Node ``i`` as version 1 writes it (``frame_refs``: frames as indices into :attr:`frames`)."""
        frame: Any = (lambda k: k) if frame_refs else self.frame_json.__getitem__
        src = self.source[i]
        out: dict[str, Any] = {
            "id": self.node_id(i),
            "primitive": self.strings[self.primitive[i]],
            "params": self.params[self.param[i]],
            "inputs": self.inputs(i),
            "outputs": self.outputs(i),
            "scope": self.strings[self.scope[i]],
            "group": self.group_of(i),
            "source": None if src == _NULL else frame(src),
            "frames": [frame(k) for k in self.stacks[self.stack[i]]],
            "transforms": list(self.transforms[self.transform[i]]),
        }
        if self.node_extra:
            _add_extra(out, self.node_extra, i, _NODE_EXTRA_ORDER)
        return out

    def value_json(self, i: int) -> dict[str, Any]:
        """Value ``i`` as version 1 writes it."""
        flags, producer = self.flags[i], self.producer[i]
        out: dict[str, Any] = {
            "id": self.value_id(i),
            "shape": list(self.shapes[self.shape[i]]),
            "dtype": self.strings[self.dtype[i]],
            "weakType": bool(flags & 1),
            "producer": None if producer == _NULL else self._ref_id(producer, self.node_ids, "n"),
            "kind": _KINDS[flags >> 1],
        }
        if self.value_extra:
            _add_extra(out, self.value_extra, i, _VALUE_EXTRA_ORDER)
        return out

    def node(self, i: int) -> Node:
        """Node ``i`` as a model object, made anew, but its ``params`` are shared with the other
        nodes made with the same params (read them, do not change them)."""
        if any(i in rows for rows in self.node_extra.values()):  # members the columns do not hold
            d = self.node_json(i, frame_refs=True)
            path = f"nodes[{i}]"
            return io._node_fast(d, path, self.frames) or io._node(d, path, self.frames)
        strings, frames, src, k = self.strings, self.frames, self.source[i], self.param[i]
        params = self._params.get(k)
        if params is None:  # as the model holds them: non-finite floats as floats, checked once
            params = self._params[k] = io._json_copy(self.params[k], f"tables.params[{k}]")
        return Node(
            self.node_id(i),
            strings[self.primitive[i]],
            params,
            self.inputs(i),
            self.outputs(i),
            strings[self.scope[i]],
            self.group_of(i),
            None if src == _NULL else frames[src],
            [frames[k] for k in self.stacks[self.stack[i]]],
            list(self.transforms[self.transform[i]]),
        )

    def value(self, i: int) -> Value:
        d = self.value_json(i)
        path = f"values[{i}]"
        return io._value_fast(d, path) or io._value(d, path)

    def set_member(self, i: int, key: str, member: Any) -> None:
        """Set (None: remove) an optional member of value ``i`` (``stats`` after a values run)."""
        rows = self.value_extra.setdefault(key, {})
        if member is None:
            rows.pop(i, None)
        else:
            rows[i] = _TEXT(io._jsonable(member))

    def set_section(self, key: str, section: Any) -> None:
        """Set (None: remove) an optional top-level section (``execution`` after a values run)."""
        if section is None:
            self.header.pop(key, None)
            if key in self._order:
                self._order.remove(key)
            return
        self.header[key] = io._jsonable(section)
        if key not in self._order:
            self._order.append(key)

    def header_json(self) -> dict[str, Any]:
        """The version 1 object without its nodes and values (``nodes: []``, ``values: []``)."""
        out: dict[str, Any] = {}
        for key in self._order:
            out[key] = [] if key in ("nodes", "values") else self.header[key]
        out["version"] = VERSION
        return out

    def shell(self) -> Graph:
        """The graph without nodes and values: everything small (ports, groups, sections), read
        once; the caller's to change (:meth:`to_graph` copies it)."""
        if self._shell is None:
            self._shell = io.from_json(self.header_json())
        return self._shell

    def to_graph(self) -> Graph:
        """The whole graph as model objects (for the readers that need every node at once)."""
        with collector.paused():
            nodes = [self.node(i) for i in range(self.node_count)]
            values = [self.value(i) for i in range(self.value_count)]
        return replace(copy.deepcopy(self.shell()), nodes=nodes, values=values)

    def rows(self) -> Rows:
        """What the summary reads of the nodes and values (``report.render_summary``), from the
        columns: counts by string index, a value made only when a port asks for it."""
        from jaxlsp.graph.report import Rows

        def by_text(column: array[int]) -> Counter[str]:
            out: Counter[str] = Counter()
            for k, count in Counter(column).items():  # a string may be listed twice in a hand-made file
                out[self.strings[k]] += count
            return out

        made: dict[str, Value | None] = {}  # the summary asks for a port's value more than once

        def value(value_id: str) -> Value | None:
            if value_id not in made:
                i = self.value_index(value_id)
                made[value_id] = None if i is None else self.value(i)
            return made[value_id]

        return Rows(self.node_count, self.value_count, by_text(self.scope), by_text(self.primitive), value)

    def iter_compact(self) -> Iterator[str]:
        """The compact (version 2) JSON text of the graph as it is now (members and sections set
        since included), a column at a time: what the viewer reads and expands itself (a
        200,000-equation graph is 9 MB this way, 230 MB expanded)."""
        encode_ = _TEXT
        index = {text: i for i, text in reversed(list(enumerate(self.strings)))}
        names = self.names

        def coded(codes: array[int]) -> str:  # -1 null, -2 - k a dangling id, else an index
            return encode_([c if c >= _NULL else names[-2 - c] for c in codes])

        def refs() -> Iterator[str]:
            previous = 0
            out: list[int | str] = []
            for r in self.refs:
                if r >= 0:
                    out.append(r - previous)
                    previous = r
                else:
                    out.append(names[-2 - r])
            yield encode_(out)

        def extra(members: dict[str, dict[int, str]]) -> str:
            rows = [
                encode_(name) + ":[" + ",".join(f"[{row},{text}]" for row, text in sorted(items.items())) + "]"
                for name, items in members.items()
                if items
            ]
            return "{" + ",".join(rows) + "}"

        def ids(own: list[str] | None) -> str:
            return "null" if own is None else encode_([index[i] for i in own])

        n_out = [self.start[i + 1] - self.start[i] - self.n_in[i] for i in range(self.node_count)]
        header = self.header_json()
        header["version"] = COMPACT_VERSION
        yield "{"
        for k, key in enumerate(header):
            yield ("," if k else "") + encode_(key) + ":"
            if key == "nodes":
                yield "{"
                yield f'"count":{self.node_count},"ids":{ids(self.node_ids)}'
                for name, column in (("primitive", self.primitive), ("params", self.param), ("scope", self.scope)):
                    yield f',"{name}":' + encode_(column.tolist())
                yield ',"group":' + coded(self.group)
                yield ',"source":' + encode_(self.source.tolist())
                yield ',"frames":' + encode_(self.stack.tolist())
                yield ',"transforms":' + encode_(self.transform.tolist())
                yield ',"inputs":' + encode_(self.n_in.tolist())
                yield ',"outputs":' + encode_(n_out)
                yield ',"refs":'
                yield from refs()
                yield ',"extra":' + extra(self.node_extra) + "}"
            elif key == "values":
                values_extra = {**self.value_extra, "producer": self._producer_extra}
                yield "{"
                yield f'"count":{self.value_count},"ids":{ids(self.value_ids)}'
                yield ',"shape":' + encode_(self.shape.tolist())
                yield ',"dtype":' + encode_(self.dtype.tolist())
                yield ',"flags":' + encode_(self.flags.tolist())
                yield ',"extra":' + extra(values_extra) + "}"
            else:
                yield encode_(header[key])
        yield ',"tables":' + encode_(self._tables)
        yield "}"

    def iter_json(self) -> Iterator[str]:
        """The expanded (version 1) JSON text, ``io.dumps`` of :meth:`to_graph`, a row at a time."""
        header = self.header_json()
        encode_ = _TEXT
        yield "{"
        for k, key in enumerate(header):
            yield ("," if k else "") + encode_(key) + ":"
            if key == "nodes" or key == "values":
                rows = self.node_json if key == "nodes" else self.value_json
                count = self.node_count if key == "nodes" else self.value_count
                yield "["
                for i in range(count):
                    yield ("," if i else "") + encode_(rows(i))
                yield "]"
            else:
                yield encode_(header[key])
        yield "}"


def _add_extra(out: dict[str, Any], extra: dict[str, dict[int, str]], i: int, order: tuple[str, ...]) -> None:
    for key in order:
        text = extra.get(key, {}).get(i)
        if text is not None:
            out[key] = json.loads(text)
    for key, rows in extra.items():
        if key not in order and i in rows:
            out[key] = json.loads(rows[i])


def _find(ident: str, ids: list[str] | None, prefix: str, count: int, owner: Packed, cache: str) -> int | None:
    if ids is None:
        digits = ident[1:]
        if ident[:1] != prefix or not digits.isdigit() or (digits[0] == "0" and digits != "0") or not digits.isascii():
            return None
        i = int(digits)
        return i if i < count else None
    index: dict[str, int] | None = getattr(owner, cache)
    if index is None:
        index = {}
        for i, x in enumerate(ids):
            index.setdefault(x, i)
        setattr(owner, cache, index)
    return index.get(ident)


def from_compact(data: Any) -> Graph:
    """The :class:`Graph` of a version 2 object (``io.from_json`` calls it)."""
    packed = Packed(data)
    data = packed.header_json()
    data["nodes"] = [packed.node_json(i, frame_refs=True) for i in range(packed.node_count)]
    data["values"] = [packed.value_json(i) for i in range(packed.value_count)]
    data[io.FRAME_TABLE] = packed.frame_json
    return io.from_json(data)


# --------------------------------------------------------------------------------------------
# a worker's compact form -> the graph file, as it came


class CompactFile:
    """A worker's compact (version 2) object checked as :func:`jaxlsp.graph.io.from_json` checks
    it, and the file ``io.write(graph, compact=True)`` writes of the graph it reads to, without a
    model object per node and value: ``jaxlsp trace -o``'s way (at 100,000 equations the decode
    into model objects and the encode back were 20 s of a 125 s cold trace).

    The columns are checked as :class:`Packed` reads them; what ``from_json`` checks beyond them
    is checked here: each distinct params object once (non-finite numbers), the strings that must
    not be empty (ids, primitives, dtypes), and every row with optional members (``costs``,
    ``literal``, ``stats``, ``sharding``, ...), which is read as a model object, so its members
    are checked by their readers and written back as those readers give them. The header's
    sections are read the same way (:meth:`Packed.shell`) and written from what was read. So
    :attr:`data` is ``io.to_compact(io.from_json(data))``, made of the worker's own lists."""

    def __init__(self, data: Any) -> None:
        try:
            self.packed = packed = Packed(data)
            shell = packed.shell()
            self._check_params()
            self._check_strings()
            node_extra = self._rows_members(packed.node_extra, packed.node, io._node_json)
            value_extra = self._rows_members(packed.value_extra, packed.value, io._value_json)
        except (TypeError, KeyError, IndexError) as exc:  # what the columns' checks did not foresee
            raise ValueError(f"<graph>: {type(exc).__name__}: {exc}") from None
        nodes = {**data["nodes"], "extra": _members(data["nodes"]["extra"] or {}, node_extra)}
        values = {**data["values"], "extra": _members(data["values"]["extra"] or {}, value_extra)}
        out: dict[str, Any] = {}
        for key, item in io.to_json(shell).items():  # encode's layout: tables just before nodes
            if key == "nodes":
                out["tables"] = data["tables"]
                out["nodes"] = nodes
            else:
                out[key] = values if key == "values" else item
        out["version"] = COMPACT_VERSION
        self.data = out
        self.graph = shell  # the small parts as model objects: ports, groups, sections

    def text(self) -> str:
        """The file's JSON text (``io.dumps(graph, compact=True)``)."""
        return json.dumps(self.data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def _check_params(self) -> None:
        packed = self.packed
        for k, p in enumerate(packed.params):
            if k not in packed._params:  # kept as the model holds them: node() reuses them
                packed._params[k] = io._json_copy(p, f"tables.params[{k}]")

    def _check_strings(self) -> None:
        packed = self.packed
        if "" not in packed.strings:
            return
        empty = {k for k, text in enumerate(packed.strings) if not text}
        columns = [("nodes", "primitive", packed.primitive), ("values", "dtype", packed.dtype)]
        for what, name, column in columns:
            for k in empty:
                if k in column:
                    raise io._fail(f"{what}[{column.index(k)}].{name}", "expected a non-empty string")
        for what, ids in (("nodes", packed.node_ids), ("values", packed.value_ids)):
            if ids is not None and "" in ids:
                raise io._fail(f"{what}[{ids.index('')}].id", "expected a non-empty string")

    @staticmethod
    def _rows_members(extra: dict[str, dict[int, str]], row: Any, spell: Any) -> dict[str, dict[int, Any]]:
        """Each optional member of each row that has one, as the model object read from the row
        spells it (``io._node_json`` / ``io._value_json``): member name -> row -> JSON value, in
        row order; a member its reader drops (a null ``costs``) is absent."""
        out: dict[str, dict[int, Any]] = {key: {} for key in extra}
        for i in sorted({i for rows in extra.values() for i in rows}):
            spelled = spell(row(i))
            for key, rows in extra.items():
                if i in rows and key in spelled:
                    out[key][i] = spelled[key]
        return out


def _members(sent: dict[str, Any], canonical: dict[str, dict[int, Any]]) -> dict[str, Any]:
    """``extra`` with each member as read back (``canonical``), by row, in the order of the
    members as sent (encode's: as first met); a member no row keeps is left out, as encode does."""
    out: dict[str, Any] = {}
    for key, pairs in sent.items():
        rows = canonical.get(key)
        kept = pairs if rows is None else [[i, member] for i, member in rows.items()]
        if kept:
            out[key] = kept
    return out
