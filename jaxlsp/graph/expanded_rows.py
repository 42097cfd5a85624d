"""The rows of the expanded form (version 1) read back, strictly: frames, ports, nodes and values,
with a node's ``costs`` and a value's ``stats`` and ``sharding`` (docs/graph-format.md).

Stdlib only, Python >= 3.10: the capture worker imports this module inside the user's interpreter.
Each row is read twice over at worst: a fast path builds the common, well-formed record with inline
checks; anything else goes to the checked reader, which finds the first problem and raises a
``ValueError`` naming its key path. :func:`read_frame`, :func:`read_node` and :func:`read_value`
do both; the whole object is read by :mod:`jaxlsp.graph.expanded_read`, the compact form's rows by
:class:`jaxlsp.graph.packed.Packed`.
"""

from __future__ import annotations

from typing import Any

from jaxlsp.graph import shardings, strict
from jaxlsp.graph.model import FRAME_TABLE, VALUE_KINDS, Frame, Node, Port, Value

# A node's ``costs`` (jaxlsp.graph.costs): required and optional members, integers unless named.
COST_KEYS = ("flops", "bytes", "transcendentals", "runs")
_COST_OPTIONAL = ("trips", "tripsStatic", "branch", "unknown")


def read_frame(data: Any, path: str) -> Frame:
    """A frame object (``source``, an entry of ``frames``), checked."""
    return _frame_fast(data) or _frame(data, path)


def read_node(data: Any, path: str, table: list[Frame] | None = None) -> Node:
    """A node object, checked; ``table``: its frames are indices into it (the earlier workers'
    pipe form, ``frameTable``), else frame objects."""
    return _node_fast(data, path, table) or _node(data, path, table)


def read_value(data: Any, path: str) -> Value:
    """A value object, checked."""
    return _value_fast(data, path) or _value(data, path)


# Fast paths: the common, well-formed record is built with inline checks; anything else goes to
# the checked reader, which finds the first problem and names its key path.

_FRAME_OPTIONAL_KEYS = ("function", "package", "cell")
_FRAME_OPTIONAL = frozenset(_FRAME_OPTIONAL_KEYS)
_NODE_KEYS = ("id", "primitive", "params", "inputs", "outputs", "scope", "group", "source", "frames", "transforms")
_NODE_OPTIONAL = ("costs",)
_NODE_KEY_SET = frozenset(_NODE_KEYS)
_NODE_KEY_SET_COSTS = frozenset((*_NODE_KEYS, "costs"))


def _frame_fast(d: Any) -> Frame | None:
    if type(d) is not dict or not 5 <= len(d) <= 8 or len(d.keys() - _FRAME_OPTIONAL) != 5:
        return None
    get: Any = d.get
    cell = get("cell")
    if cell is not None and (type(cell) is not int or cell < 0):
        return None
    p, line, col, end_line, end_col = (
        get("path"),
        get("line"),
        get("column"),
        get("endLine"),
        get("endColumn"),
    )
    fn = get("function")
    package = get("package")
    if (
        type(p) is str
        and p
        and type(line) is int
        and line >= 1
        and type(col) is int
        and col >= 0
        and type(end_line) is int
        and end_line >= 1
        and type(end_col) is int
        and end_col >= 0
        and (fn is None or type(fn) is str)
        and (package is None or (type(package) is str and package))
    ):
        return Frame(p, line, col, end_line, end_col, fn, package, cell)
    return None


def _strs_fast(items: Any) -> bool:
    return type(items) is list and all(type(x) is str for x in items)


def _node_fast(d: Any, path: str, table: list[Frame] | None = None) -> Node | None:
    if type(d) is not dict or (d.keys() != _NODE_KEY_SET and d.keys() != _NODE_KEY_SET_COSTS):
        return None
    get: Any = d.get
    nid, prim, params, ins, outs = get("id"), get("primitive"), get("params"), get("inputs"), get("outputs")
    scope, group, src, frames, transforms = (
        get("scope"),
        get("group"),
        get("source"),
        get("frames"),
        get("transforms"),
    )
    if not (
        type(nid) is str
        and nid
        and type(prim) is str
        and prim
        and type(params) is dict
        and _strs_fast(ins)
        and _strs_fast(outs)
        and type(scope) is str
        and (group is None or (type(group) is str and group))
        and type(frames) is list
        and _strs_fast(transforms)
    ):
        return None
    source = None
    if table is not None:  # the packed transport: indices into the frame table
        size = len(table)
        if src is not None:
            if type(src) is not int or not 0 <= src < size:
                return None
            source = table[src]
        if not all(type(f) is int and 0 <= f < size for f in frames):
            return None
        stack = [table[f] for f in frames]
    else:
        if src is not None:
            source = _frame_fast(src)
            if source is None:
                return None
        stack = []
        for f in frames:
            frame = _frame_fast(f)
            if frame is None:
                return None
            stack.append(frame)
    params = strict.json_copy(params, strict.join(path, "params")) if params else {}
    costs = get("costs")
    if costs is not None:
        costs = _costs(costs, strict.join(path, "costs"))
    return Node(nid, prim, params, list(ins), list(outs), scope, group, source, stack, list(transforms), costs)


def _value_fast(d: Any, path: str) -> Value | None:
    if (
        type(d) is not dict
        or not 6 <= len(d) <= 9
        or len(d) - 6 != ("literal" in d) + ("stats" in d) + ("sharding" in d)
    ):
        return None  # optional keys other than literal, stats, sharding (perDevice, ...): the checked reader
    get: Any = d.get
    vid, shape, dtype, weak, producer, kind = (
        get("id"),
        get("shape"),
        get("dtype"),
        get("weakType"),
        get("producer"),
        get("kind"),
    )
    if not (
        type(vid) is str
        and vid
        and type(shape) is list
        and all((type(x) is int and x >= 0) or (type(x) is str and x) for x in shape)
        and type(dtype) is str
        and dtype
        and type(weak) is bool
        and (producer is None or (type(producer) is str and producer))
        and kind in VALUE_KINDS
        and type(kind) is str
        and all(k in d for k in ("id", "shape", "dtype", "weakType", "producer", "kind"))
    ):
        return None
    literal = get("literal")
    if literal is not None:
        literal = strict.json_copy(literal, strict.join(path, "literal"))
    stats = get("stats")
    if stats is not None:
        stats = _stats(stats, strict.join(path, "stats"))
    sharding = get("sharding")
    if sharding is not None:
        sharding = shardings.read_value(sharding, strict.join(path, "sharding"), len(shape))
    return Value(vid, list(shape), dtype, weak, producer, literal, kind, stats=stats, sharding=sharding)


def _frame(data: Any, path: str) -> Frame:
    d = strict.obj(data, path, ("path", "line", "column", "endLine", "endColumn"), _FRAME_OPTIONAL_KEYS)
    return Frame(
        path=strict.string(d["path"], strict.join(path, "path"), nonempty=True),
        line=strict.integer(d["line"], strict.join(path, "line"), 1),
        column=strict.integer(d["column"], strict.join(path, "column"), 0),
        end_line=strict.integer(d["endLine"], strict.join(path, "endLine"), 1),
        end_column=strict.integer(d["endColumn"], strict.join(path, "endColumn"), 0),
        function=strict.opt_string(d.get("function"), strict.join(path, "function")),
        package=strict.opt_string(d.get("package"), strict.join(path, "package"), nonempty=True),
        cell=None if d.get("cell") is None else strict.integer(d["cell"], strict.join(path, "cell"), 0),
    )


def read_port(data: Any, path: str, roles: tuple[str, ...]) -> Port:
    d = strict.obj(data, path, ("value", "label", "role"))
    return Port(
        value=strict.string(d["value"], strict.join(path, "value"), nonempty=True),
        label=strict.string(d["label"], strict.join(path, "label")),
        role=strict.enum(d["role"], strict.join(path, "role"), roles),
    )


def _frame_ref(data: Any, path: str, table: list[Frame] | None) -> Frame:
    if table is None:
        return _frame(data, path)
    if type(data) is not int or not 0 <= data < len(table):
        raise strict.fail(
            path, f"expected an index into {FRAME_TABLE} (0 to {len(table) - 1}), got {strict.kind(data)}"
        )
    return table[data]


def _costs(data: Any, path: str) -> dict[str, Any]:
    """A node's ``costs``: ``flops``, ``bytes``, ``transcendentals``, ``runs`` (integers >= 0) and
    optionally ``trips``, ``branch`` (integers >= 0), ``tripsStatic`` (boolean), ``unknown`` (why
    XLA gave no figures)."""
    d = strict.obj(data, path, COST_KEYS, _COST_OPTIONAL)
    out: dict[str, Any] = {key: strict.integer(d[key], strict.join(path, key), 0) for key in COST_KEYS}
    for key in ("trips", "branch"):
        if key in d:
            out[key] = strict.integer(d[key], strict.join(path, key), 0)
    if "tripsStatic" in d:
        out["tripsStatic"] = strict.boolean(d["tripsStatic"], strict.join(path, "tripsStatic"))
    if "unknown" in d:
        out["unknown"] = strict.string(d["unknown"], strict.join(path, "unknown"))
    return out


def _node(data: Any, path: str, table: list[Frame] | None = None) -> Node:
    d = strict.obj(data, path, _NODE_KEYS, _NODE_OPTIONAL)
    params = d["params"]
    if not isinstance(params, dict):
        raise strict.fail(strict.join(path, "params"), f"expected an object, got {strict.kind(params)}")
    frames_path = strict.join(path, "frames")
    return Node(
        id=strict.string(d["id"], strict.join(path, "id"), nonempty=True),
        primitive=strict.string(d["primitive"], strict.join(path, "primitive"), nonempty=True),
        params=strict.json_copy(params, strict.join(path, "params")),
        inputs=strict.strings(d["inputs"], strict.join(path, "inputs")),
        outputs=strict.strings(d["outputs"], strict.join(path, "outputs")),
        scope=strict.string(d["scope"], strict.join(path, "scope")),
        group=strict.opt_string(d["group"], strict.join(path, "group"), nonempty=True),
        source=None if d["source"] is None else _frame_ref(d["source"], strict.join(path, "source"), table),
        frames=[
            _frame_ref(f, f"{frames_path}[{i}]", table) for i, f in enumerate(strict.array(d["frames"], frames_path))
        ],
        transforms=strict.strings(d["transforms"], strict.join(path, "transforms")),
        costs=None if d.get("costs") is None else _costs(d["costs"], strict.join(path, "costs")),
    )


def read_shape(data: Any, path: str) -> list[int | str]:
    dims = strict.array(data, path)
    for i, dim in enumerate(dims):
        if isinstance(dim, str):
            if not dim:
                raise strict.fail(f"{path}[{i}]", "expected a non-empty symbolic dimension")
        elif isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise strict.fail(
                f"{path}[{i}]", f"expected an integer >= 0 or a symbolic dimension, got {strict.kind(dim)}"
            )
    return list(dims)


def _value(data: Any, path: str) -> Value:
    d = strict.obj(
        data,
        path,
        ("id", "shape", "dtype", "weakType", "producer", "kind"),
        ("literal", "perDevice", "globalShape", "stats", "sharding"),
    )
    per_device = strict.boolean(d["perDevice"], strict.join(path, "perDevice")) if "perDevice" in d else False
    global_shape = read_shape(d["globalShape"], strict.join(path, "globalShape")) if "globalShape" in d else None
    stats = d.get("stats")
    shape = read_shape(d["shape"], strict.join(path, "shape"))
    sharding = d.get("sharding")
    return Value(
        id=strict.string(d["id"], strict.join(path, "id"), nonempty=True),
        shape=shape,
        dtype=strict.string(d["dtype"], strict.join(path, "dtype"), nonempty=True),
        weak_type=strict.boolean(d["weakType"], strict.join(path, "weakType")),
        producer=strict.opt_string(d["producer"], strict.join(path, "producer"), nonempty=True),
        literal=strict.json_copy(d.get("literal"), strict.join(path, "literal")),
        kind=strict.enum(d["kind"], strict.join(path, "kind"), VALUE_KINDS),
        per_device=per_device,
        global_shape=global_shape,
        stats=None if stats is None else _stats(stats, strict.join(path, "stats")),
        sharding=None
        if sharding is None
        else shardings.read_value(sharding, strict.join(path, "sharding"), len(shape)),
    )


# A value's statistics (a values run): optional everywhere, so shapes-only graphs are unchanged.
STATS_COUNTS = ("count", "finite", "nan", "posInf", "negInf")
STATS_NUMBERS = ("min", "max", "mean", "std", "meanAbs")
HISTOGRAM_BINS = 32


def _stats(data: Any, path: str) -> dict[str, Any]:
    """A value's ``stats`` object (docs/graph-format.md "Statistics"), non-finite numbers as floats."""
    optional = ("iterations", "firstNonFiniteIteration")
    d = strict.obj(data, path, (*STATS_COUNTS, "zeros", *STATS_NUMBERS, "histogram"), optional)
    out: dict[str, Any] = {}
    for key in STATS_COUNTS:
        out[key] = strict.integer(d[key], strict.join(path, key), 0)
    zeros = strict.number(d["zeros"], strict.join(path, "zeros"))
    if zeros is None or not 0 <= zeros <= 1:
        raise strict.fail(strict.join(path, "zeros"), f"expected a fraction from 0 to 1, got {zeros}")
    out["zeros"] = zeros
    for key in STATS_NUMBERS:
        out[key] = strict.number(d[key], strict.join(path, key), nullable=True)
    hist = d["histogram"]
    if hist is None:
        out["histogram"] = None
    else:
        hp = strict.join(path, "histogram")
        h = strict.obj(hist, hp, ("lo", "hi", "counts"), ("approximate", "sampled"))
        counts = strict.array(h["counts"], strict.join(hp, "counts"))
        if len(counts) != HISTOGRAM_BINS:
            raise strict.fail(strict.join(hp, "counts"), f"expected {HISTOGRAM_BINS} bins, got {len(counts)}")
        out["histogram"] = {
            "lo": strict.number(h["lo"], strict.join(hp, "lo")),
            "hi": strict.number(h["hi"], strict.join(hp, "hi")),
            "counts": [strict.integer(c, f"{strict.join(hp, 'counts')}[{i}]", 0) for i, c in enumerate(counts)],
        }
        for flag in ("approximate", "sampled"):
            if flag in h:
                out["histogram"][flag] = strict.boolean(h[flag], strict.join(hp, flag))
    if "iterations" in d:
        out["iterations"] = strict.integer(d["iterations"], strict.join(path, "iterations"), 1)
    if "firstNonFiniteIteration" in d:
        where = strict.join(path, "firstNonFiniteIteration")
        out["firstNonFiniteIteration"] = [
            strict.integer(i, f"{where}[{k}]", 1)
            for k, i in enumerate(strict.array(d["firstNonFiniteIteration"], where))
        ]
    return out
