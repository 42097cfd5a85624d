"""The packed graph: one graph held as the compact form's columns (docs/graph-format.md "Compact
form"), read from a version 2 object and checked, as the server keeps it.

Stdlib only, Python >= 3.10 (the worker never needs it, but the folder is staged whole).

:class:`Packed` holds the ``array`` integers, the interned tables and the sparse members as JSON
text, and gives back what is asked for: one node or value as a model object (read by
:mod:`jaxlsp.graph.expanded_rows`, so checked as a version 1 row), the expanded (version 1) JSON
streamed a row at a time, the compact text as it is now, the whole :class:`Graph` for the rare
reader that needs everything (:func:`from_compact`).
"""

from __future__ import annotations

import copy
import json
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jaxlsp.graph import collector, strict
from jaxlsp.graph.compact_write import (
    FRAME_WIDTH,
    NODE_COLUMNS,
    NULL,
    TABLES,
    VALUE_COLUMNS,
    encode_graph,
    json_text,
)
from jaxlsp.graph.expanded_read import read_graph
from jaxlsp.graph.expanded_rows import read_frame, read_node, read_shape, read_value
from jaxlsp.graph.expanded_write import jsonable
from jaxlsp.graph.model import COMPACT_VERSION, FORMAT, FRAME_TABLE, VALUE_KINDS, VERSION, Frame, Graph, Node, Value

if TYPE_CHECKING:  # the report's only when a summary is made
    from jaxlsp.graph.report import Rows

# The order version 1 writes optional members in (expanded_write.node_json, value_json); unknown ones follow.
_NODE_EXTRA_ORDER = ("costs",)
_VALUE_EXTRA_ORDER = ("literal", "perDevice", "globalShape", "stats")


def _ints(data: Any, path: str, count: int | None, low: int, high: int | None) -> array[int]:
    """A column: a list of ``count`` integers from ``low`` to ``high`` (inclusive, None: no bound)."""
    items = strict.array(data, path)
    if count is not None and len(items) != count:
        raise strict.fail(path, f"expected {count} entries (the count), got {len(items)}")
    try:
        if any(type(x) is not int for x in items):
            raise TypeError
        column = array("q", items)
    except (TypeError, OverflowError):
        at = next(i for i, x in enumerate(items) if type(x) is not int or not -(2**63) <= x < 2**63)
        raise strict.fail(f"{path}[{at}]", f"expected an integer, got {strict.kind(items[at])}") from None
    if column:
        lo, hi = min(column), max(column)
        if lo < low or (high is not None and hi > high):
            at = next(i for i, x in enumerate(column) if x < low or (high is not None and x > high))
            bound = f"from {low} to {high}" if high is not None else f">= {low}"
            raise strict.fail(f"{path}[{at}]", f"expected an index {bound}, got {column[at]}")
    return column


def _refs(data: Any, path: str, names: list[str], known: dict[str, int], size: int) -> array[int]:
    """A column of references: an index, ``-1`` for null, or an id no row has (kept in ``names``,
    coded ``-2 - k``)."""
    items = strict.array(data, path)
    column = array("q", bytes(8 * len(items)))
    for i, x in enumerate(items):
        if type(x) is int:
            if not NULL <= x < size:
                raise strict.fail(f"{path}[{i}]", f"expected an index from -1 to {size - 1}, got {x}")
            column[i] = x
        elif x is None:
            column[i] = NULL
        elif type(x) is str and x:
            column[i] = _name(x, names, known)
        else:
            raise strict.fail(f"{path}[{i}]", f"expected an index, null or an id, got {strict.kind(x)}")
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
        raise strict.fail(path, f"expected an object, got {strict.kind(data)}")
    out: dict[str, dict[int, str]] = {}
    for key, pairs in data.items():
        where = f"{path}.{key}"
        rows: dict[int, str] = {}
        for k, pair in enumerate(strict.array(pairs, where)):
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int or not 0 <= pair[0] < size:
                raise strict.fail(f"{where}[{k}]", f"expected [row (0 to {size - 1}), member]")
            try:
                rows[pair[0]] = json_text(pair[1])
            except (TypeError, ValueError) as exc:
                raise strict.fail(f"{where}[{k}][1]", f"not a JSON value: {exc}") from None
        out[key] = rows
    return out


def _columns(data: Any, path: str, keys: tuple[str, ...]) -> tuple[dict[str, Any], int]:
    d = strict.obj(data, path, ("count", "ids", *keys, "extra"), ())
    count = strict.integer(d["count"], f"{path}.count", 0)
    return d, count


class Packed:
    """One graph held as columns (read from a version 2 object, checked; rows are checked again,
    by :mod:`jaxlsp.graph.io`, when they are materialised)."""

    def __init__(self, data: Any) -> None:
        if not isinstance(data, dict):
            raise strict.fail("", f"expected an object, got {strict.kind(data)}")
        d = data
        if d.get("format") != FORMAT or d.get("version") != COMPACT_VERSION:
            raise strict.fail("version", f"expected a {FORMAT} version {COMPACT_VERSION} object")
        for key in ("tables", "nodes", "values"):
            if key not in d:
                raise strict.fail("", f"missing key {key!r}")
        t = strict.obj(d["tables"], "tables", TABLES, ())
        self._tables = t  # as read: small (each distinct string, frame, shape... once); written back as is
        self.strings: list[str] = strict.strings(t["strings"], "tables.strings")
        top = len(self.strings) - 1
        flat = _ints(t["frames"], "tables.frames", None, NULL, None)
        if len(flat) % FRAME_WIDTH:
            raise strict.fail("tables.frames", f"expected {FRAME_WIDTH} integers per frame, got {len(flat)} in all")
        self.frame_json: list[dict[str, Any]] = []
        self.frames: list[Frame] = []
        for k in range(len(flat) // FRAME_WIDTH):
            where = f"tables.frames[{k * FRAME_WIDTH}:{(k + 1) * FRAME_WIDTH}]"
            p, line, column, end_line, end_column, fn, package, cell = flat[k * FRAME_WIDTH : (k + 1) * FRAME_WIDTH]
            for name, index in (("path", p), ("function", fn), ("package", package)):
                if index > top or (name == "path" and index < 0):
                    raise strict.fail(where, f"{name}: expected an index into tables.strings, got {index}")
            f: dict[str, Any] = {"path": self.strings[p], "line": line, "column": column}
            f["endLine"], f["endColumn"] = end_line, end_column
            if fn >= 0:
                f["function"] = self.strings[fn]
            if package >= 0:
                f["package"] = self.strings[package]
            if cell >= 0:
                f["cell"] = cell
            self.frame_json.append(f)
            self.frames.append(read_frame(f, where))
        nframes = len(self.frames)
        self.stacks: list[tuple[int, ...]] = [
            tuple(_ints(s, f"tables.stacks[{k}]", None, 0, nframes - 1))
            for k, s in enumerate(strict.array(t["stacks"], "tables.stacks"))
        ]
        self.params: list[Any] = strict.array(t["params"], "tables.params")
        for k, p in enumerate(self.params):
            if not isinstance(p, dict):
                raise strict.fail(f"tables.params[{k}]", f"expected an object, got {strict.kind(p)}")
        self.shapes: list[list[Any]] = [
            read_shape(s, f"tables.shapes[{k}]") for k, s in enumerate(strict.array(t["shapes"], "tables.shapes"))
        ]
        self.transforms: list[list[str]] = [
            strict.strings(s, f"tables.transforms[{k}]")
            for k, s in enumerate(strict.array(t["transforms"], "tables.transforms"))
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
        self.groups_json = [g for g in strict.array(d.get("groups", []), "groups")]
        group_ids = [g.get("id") if isinstance(g, dict) else None for g in self.groups_json]
        self.group = _refs(nd["group"], "nodes.group", self.names, known, len(group_ids))
        if len(self.group) != n:
            raise strict.fail("nodes.group", f"expected {n} entries (the count), got {len(self.group)}")
        self.group_ids: list[Any] = group_ids
        self.source = _ints(nd["source"], "nodes.source", n, NULL, nframes - 1)
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
        raw = strict.array(nd["refs"], "nodes.refs")
        if len(raw) != total:
            raise strict.fail("nodes.refs", f"expected {total} entries (the nodes' inputs and outputs), got {len(raw)}")
        self.refs = array("q", bytes(8 * total))
        previous = 0
        for k, r in enumerate(raw):
            if type(r) is int:
                previous += r
                if not 0 <= previous < m:
                    raise strict.fail(f"nodes.refs[{k}]", f"refers to value {previous}, not from 0 to {m - 1}")
                self.refs[k] = previous
            elif type(r) is str and r:
                self.refs[k] = _name(r, self.names, known)
            else:
                raise strict.fail(f"nodes.refs[{k}]", f"expected an integer or a value id, got {strict.kind(r)}")
        self.node_extra = _sparse(nd["extra"], "nodes.extra", n)

        self.shape = _ints(vd["shape"], "values.shape", m, 0, len(self.shapes) - 1)
        self.dtype = _ints(vd["dtype"], "values.dtype", m, 0, top)
        self.flags = _ints(vd["flags"], "values.flags", m, 0, 2 * len(VALUE_KINDS) - 1)
        self.value_extra = _sparse(vd["extra"], "values.extra", m)
        self.producer = array("q", [NULL]) * m
        for i in range(n - 1, -1, -1):  # the first node listing a value as an output
            for k in range(self.start[i] + n_in[i], self.start[i + 1]):
                if self.refs[k] >= 0:
                    self.producer[self.refs[k]] = i
        self._producer_extra = self.value_extra.get("producer", {})  # written back as read
        for row, text in self.value_extra.pop("producer", {}).items():
            code = json.loads(text)
            if code is None:
                self.producer[row] = NULL
            elif type(code) is int and 0 <= code < n:
                self.producer[row] = code
            elif type(code) is str and code:
                self.producer[row] = _name(code, self.names, known)
            else:
                raise strict.fail(
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
        ``flat``) and another header (ids, groups and sections as this one's; live/relocate.py).
        The columns and tables are shared, read only; what a values run sets later (members,
        sections) is this copy's own."""
        if len(frame_json) != len(self.frames) or len(flat) != len(frame_json) * FRAME_WIDTH:
            raise ValueError("a relocated graph has as many frames as its original")
        out = copy.copy(self)
        out._tables = {**self._tables, "frames": flat}
        out.frame_json = frame_json
        out.frames = [read_frame(f, f"tables.frames[{k * FRAME_WIDTH}]") for k, f in enumerate(frame_json)]
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
        if code == NULL:
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
            "source": None if src == NULL else frame(src),
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
            "producer": None if producer == NULL else self._ref_id(producer, self.node_ids, "n"),
            "kind": VALUE_KINDS[flags >> 1],
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
            return read_node(d, path, self.frames)
        strings, frames, src = self.strings, self.frames, self.source[i]
        return Node(
            self.node_id(i),
            strings[self.primitive[i]],
            self.model_params(self.param[i]),
            self.inputs(i),
            self.outputs(i),
            strings[self.scope[i]],
            self.group_of(i),
            None if src == NULL else frames[src],
            [frames[k] for k in self.stacks[self.stack[i]]],
            list(self.transforms[self.transform[i]]),
        )

    def model_params(self, k: int) -> Any:
        """``tables.params[k]`` as the model holds it (non-finite floats as floats), checked the
        first time it is asked for and shared by the nodes made with it after."""
        params = self._params.get(k)
        if params is None:
            params = self._params[k] = strict.json_copy(self.params[k], f"tables.params[{k}]")
        return params

    def value(self, i: int) -> Value:
        d = self.value_json(i)
        path = f"values[{i}]"
        return read_value(d, path)

    def set_member(self, i: int, key: str, member: Any) -> None:
        """Set (None: remove) an optional member of value ``i`` (``stats`` after a values run)."""
        rows = self.value_extra.setdefault(key, {})
        if member is None:
            rows.pop(i, None)
        else:
            rows[i] = json_text(jsonable(member))

    def set_section(self, key: str, section: Any) -> None:
        """Set (None: remove) an optional top-level section (``execution`` after a values run)."""
        if section is None:
            self.header.pop(key, None)
            if key in self._order:
                self._order.remove(key)
            return
        self.header[key] = jsonable(section)
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
            with collector.paused():
                self._shell = read_graph(self.header_json())
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
        encode_ = json_text
        index = {text: i for i, text in reversed(list(enumerate(self.strings)))}
        names = self.names

        def coded(codes: array[int]) -> str:  # -1 null, -2 - k a dangling id, else an index
            return encode_([c if c >= NULL else names[-2 - c] for c in codes])

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
        encode_ = json_text
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
    data[FRAME_TABLE] = packed.frame_json
    return read_graph(data)
