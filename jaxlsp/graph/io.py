"""The graph file: :class:`~jaxlsp.graph.model.Graph` to and from its JSON form (docs/graph-format.md).

Stdlib only, Python >= 3.10: the capture worker imports this module inside the user's interpreter.

``to_json`` writes the camelCase keys of the format; ``from_json`` is strict and raises a
``ValueError`` that names the key path (``nodes[3].source.endLine: ...``) of the first problem.
Non-finite floats in ``params`` and ``literal`` (``-inf`` attention masks, ``nan`` fills) have no
JSON spelling and are written as ``{"float": "nan" | "inf" | "-inf"}``; ``from_json`` turns them
back into floats.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from jaxlsp.graph import collector, shardings, slices
from jaxlsp.graph.model import COMPACT_VERSION, FORMAT, VERSION, Coverage, Frame, Graph, Group, Node, Port, Value

BACKEND = "jaxpr"
VERSION_KEYS = ("jax", "jaxlib", "flax", "equinox", "python")
INPUT_ROLES = ("parameter", "state", "input", "key", "constant")
OUTPUT_ROLES = ("output", "state")
VALUE_KINDS = ("var", "literal", "const")

FRAME_TABLE = "frameTable"  # only in earlier workers' pipe form (to_frame_table), never in a graph file
_TOP_KEYS = (
    "format",
    "version",
    "backend",
    "versions",
    "target",
    "profile",
    "coverage",
    "sources",
    "inputs",
    "outputs",
    "nodes",
    "values",
    "groups",
)
_OPTIONAL_TOP_KEYS = ("costs", "execution", "contracts", "mesh", "compiled", "time")
# The graph's ``costs``: how the per-node figures were measured (docs/graph-format.md).
_GRAPH_COST_KEYS = ("equations", "measured", "unique", "cached", "lowered", "unknown", "seconds", "xla")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# A node's ``costs`` (jaxlsp.graph.costs): required and optional members, integers unless named.
COST_KEYS = ("flops", "bytes", "transcendentals", "runs")
_COST_OPTIONAL = ("trips", "tripsStatic", "branch", "unknown")


# --------------------------------------------------------------------------------------------
# Graph -> JSON


def _jsonable(obj: Any) -> Any:
    """A JSON-safe copy: dict keys sorted, tuples as lists, non-finite floats as ``{"float": ...}``."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(x) for x in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    return obj


def _frame_json(frame: Frame) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": frame.path,
        "line": frame.line,
        "column": frame.column,
        "endLine": frame.end_line,
        "endColumn": frame.end_column,
    }
    if frame.function is not None:
        out["function"] = frame.function
    if frame.package is not None:
        out["package"] = frame.package
    if frame.cell is not None:
        out["cell"] = frame.cell
    return out


def _port_json(port: Port) -> dict[str, Any]:
    return {"value": port.value, "label": port.label, "role": port.role}


def _node_json(node: Node, frame: Callable[[Frame], Any] = _frame_json) -> dict[str, Any]:
    """A node's version 1 object, its frames written by ``frame``."""
    return {
        "id": node.id,
        "primitive": node.primitive,
        "params": _jsonable(node.params),
        "inputs": list(node.inputs),
        "outputs": list(node.outputs),
        "scope": node.scope,
        "group": node.group,
        "source": None if node.source is None else frame(node.source),
        "frames": [frame(f) for f in node.frames],
        "transforms": list(node.transforms),
        **({} if node.costs is None else {"costs": dict(node.costs)}),
    }


def _value_json(value: Value) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": value.id,
        "shape": list(value.shape),
        "dtype": value.dtype,
        "weakType": value.weak_type,
        "producer": value.producer,
        "kind": value.kind,
    }
    out.update(value_extras(value))
    return out


def value_extras(value: Value) -> Iterator[tuple[str, Any]]:
    """A value's optional members as its version 1 object writes them (in this order), JSON-safe."""
    if value.literal is not None:
        yield "literal", _jsonable(value.literal)
    if value.per_device:
        yield "perDevice", True
    if value.global_shape is not None:
        yield "globalShape", list(value.global_shape)
    if value.stats is not None:
        yield "stats", _jsonable(value.stats)
    if value.sharding is not None:
        yield "sharding", _jsonable(value.sharding)


def _group_json(group: Group) -> dict[str, Any]:
    return {"id": group.id, "kind": group.kind, "parent": group.parent, "label": group.label, "node": group.node}


def to_json(graph: Graph) -> dict[str, Any]:
    """The JSON form of ``graph`` (plain dicts and lists, keys in the format's order)."""
    cov = graph.coverage
    data = {
        "format": graph.format,
        "version": graph.version,
        "backend": graph.backend,
        "versions": _jsonable(graph.versions),
        "target": _jsonable(graph.target),
        "profile": _jsonable(graph.profile),
        "coverage": {
            "scope": cov.scope,
            "complete": cov.complete,
            "opaque": [_jsonable(o) for o in cov.opaque],
            "notes": list(cov.notes),
            "effects": list(cov.effects),
        },
        "sources": {k: graph.sources[k] for k in sorted(graph.sources)},
        "inputs": [_port_json(p) for p in graph.inputs],
        "outputs": [_port_json(p) for p in graph.outputs],
        "nodes": [_node_json(n) for n in graph.nodes],
        "values": [_value_json(v) for v in graph.values],
        "groups": [_group_json(g) for g in graph.groups],
        **({} if graph.costs is None else {"costs": _jsonable(graph.costs)}),
    }
    if graph.execution is not None:
        data["execution"] = _jsonable(graph.execution)
    if graph.contracts is not None:
        data["contracts"] = _jsonable(graph.contracts)
    if graph.mesh is not None:
        data["mesh"] = _jsonable(graph.mesh)
    if graph.compiled is not None:
        data["compiled"] = _jsonable(graph.compiled)
    if graph.time is not None:
        data["time"] = _jsonable(graph.time)
    return data


def to_frame_table(graph: Graph) -> dict[str, Any]:
    """:func:`to_json` with each distinct frame written once in ``frameTable`` and nodes'
    ``source`` and ``frames`` as indices into it: the pipe form of earlier workers (a large model
    repeats a few hundred frames in thousands of stacks), still read by :func:`from_json`, which
    then shares one :class:`Frame` per entry. Never a graph file."""
    index: dict[int, int] = {}
    table: list[dict[str, Any]] = []

    def at(frame: Frame) -> int:
        i = index.get(id(frame))
        if i is None:
            i = index[id(frame)] = len(table)
            table.append(_frame_json(frame))
        return i

    data = to_json(replace(graph, nodes=[]))
    data["nodes"] = [_node_json(n, at) for n in graph.nodes]
    data[FRAME_TABLE] = table
    return data


def to_compact(graph: Graph) -> dict[str, Any]:
    """The compact form of ``graph`` (version 2: columns and interned tables, docs/graph-format.md
    "Compact form"); :func:`from_json` reads it back to an equal graph. Also the form the worker
    sends the server, several times smaller to write, send and read than :func:`to_json`."""
    from jaxlsp.graph import compact

    return compact.encode_graph(graph)


def dumps(graph: Graph, sliced: bool = False, compact: bool = False) -> str:
    """JSON text (no spaces) of ``graph``, expanded (version 1) or with ``compact`` the compact
    form (version 2); equal graphs give identical text. ``sliced``: the same text made a node at a
    time (``slices.py``: a thread doing it lets the server's event loop run)."""
    data = to_compact(graph) if compact else to_json(graph)
    if sliced:
        text = slices.dumps(data, depth=3 if compact else 2)
        slices.release(data)  # a piece at a time: freed at once, it holds the GIL (slices.release)
        return text
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def write(graph: Graph, path: str | os.PathLike[str], sliced: bool = False, compact: bool = False) -> None:
    """Write ``graph`` to ``path`` (UTF-8) atomically: readers never see half a file. ``compact``:
    the compact form (version 2), else the expanded one (version 1)."""
    write_text(dumps(graph, sliced, compact), path)


def write_text(text: str | Iterable[str], path: str | os.PathLike[str]) -> None:
    """Write a graph's text (or its pieces) to ``path`` atomically."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if isinstance(text, str):
                f.write(text)
            else:
                _write_pieces(f, text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


WRITE_BATCH = 256 * 1024  # characters joined before one write


def _write_pieces(f: TextIO, pieces: Iterable[str]) -> None:
    """Write ``pieces`` joined into writes of about :data:`WRITE_BATCH` characters.

    A write per piece (``writelines`` too) lets the GIL go and takes it back at every flush of the
    text layer (8 KiB); a thread waiting for it (the server's event loop, while a graph thread
    exports) seldom wins it in those microseconds, and CPython asks the holder to let go only when
    the GIL did not change hands for a whole switch interval, so the waiter starves: hovers waited
    up to 1.1 s behind the soak's 60,000-equation json export (issue 25). With writes of 256 KiB
    the longest wait of a thread ticking every 0.5 ms beside it went from 56-121 ms to 3 ms."""
    batch: list[str] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if size >= WRITE_BATCH:
            f.write("".join(batch))
            batch, size = [], 0
    if batch:
        f.write("".join(batch))


# --------------------------------------------------------------------------------------------
# JSON -> Graph (strict)


def _kind(obj: Any) -> str:
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "a boolean"
    if isinstance(obj, int):
        return "an integer"
    if isinstance(obj, float):
        return "a number"
    if isinstance(obj, str):
        return "a string"
    if isinstance(obj, list):
        return "an array"
    if isinstance(obj, dict):
        return "an object"
    return type(obj).__name__


def _fail(path: str, message: str) -> ValueError:
    return ValueError(f"{path or '<graph>'}: {message}")


def _obj(data: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _fail(path, f"expected an object, got {_kind(data)}")
    for key in required:
        if key not in data:
            raise _fail(path, f"missing key {key!r}")
    if len(data) > len(required):
        for key in data:
            if key not in required and key not in optional:
                raise _fail(_join(path, str(key)), "unknown key")
    return data


def _open_obj(data: Any, path: str, required: tuple[str, ...]) -> dict[str, Any]:
    """An object with ``required`` keys that may hold others too (``target``, ``profile``, ``versions``)."""
    if not isinstance(data, dict):
        raise _fail(path, f"expected an object, got {_kind(data)}")
    for key in required:
        if key not in data:
            raise _fail(path, f"missing key {key!r}")
    return data


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _str(data: Any, path: str, *, nonempty: bool = False) -> str:
    if not isinstance(data, str):
        raise _fail(path, f"expected a string, got {_kind(data)}")
    if nonempty and not data:
        raise _fail(path, "expected a non-empty string")
    return data


def _opt_str(data: Any, path: str, *, nonempty: bool = False) -> str | None:
    if data is None:
        return None
    if not isinstance(data, str):
        raise _fail(path, f"expected a string or null, got {_kind(data)}")
    if nonempty and not data:
        raise _fail(path, "expected a non-empty string or null")
    return data


def _int(data: Any, path: str, minimum: int) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise _fail(path, f"expected an integer, got {_kind(data)}")
    if data < minimum:
        raise _fail(path, f"expected an integer >= {minimum}, got {data}")
    return data


def _bool(data: Any, path: str) -> bool:
    if not isinstance(data, bool):
        raise _fail(path, f"expected a boolean, got {_kind(data)}")
    return data


def _list(data: Any, path: str) -> list[Any]:
    if not isinstance(data, list):
        raise _fail(path, f"expected an array, got {_kind(data)}")
    return data


def _strs(data: Any, path: str) -> list[str]:
    items = _list(data, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _fail(f"{path}[{i}]", f"expected a string, got {_kind(item)}")
    return list(items)


def _enum(data: Any, path: str, allowed: tuple[str, ...]) -> str:
    if data not in allowed or not isinstance(data, str):
        raise _fail(path, f"expected one of {', '.join(allowed)}, got {json.dumps(data, default=repr)}")
    return data


def _json_copy(data: Any, path: str) -> Any:
    """A copy of a JSON value with ``{"float": "nan" | "inf" | "-inf"}`` turned back into floats;
    rejects what JSON cannot hold (non-finite floats, non-string keys, other objects)."""
    if data is None or isinstance(data, (str, bool, int)):
        return data
    if isinstance(data, float):
        if not math.isfinite(data):
            raise _fail(path, 'non-finite number: write it as {"float": "nan" | "inf" | "-inf"}')
        return data
    if isinstance(data, list):
        return [_json_copy(item, f"{path}[{i}]") for i, item in enumerate(data)]
    if isinstance(data, dict):
        spelled = data.get("float") if len(data) == 1 else None
        if isinstance(spelled, str) and spelled in _NONFINITE:
            return _NONFINITE[spelled]
        out = {}
        for key, item in data.items():
            if not isinstance(key, str):
                raise _fail(path, f"object key {key!r} is not a string")
            out[key] = _json_copy(item, _join(path, key))
        return out
    raise _fail(path, f"not a JSON value: {_kind(data)}")


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
    params = _json_copy(params, _join(path, "params")) if params else {}
    costs = get("costs")
    if costs is not None:
        costs = _costs(costs, _join(path, "costs"))
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
        literal = _json_copy(literal, _join(path, "literal"))
    stats = get("stats")
    if stats is not None:
        stats = _stats(stats, _join(path, "stats"))
    sharding = get("sharding")
    if sharding is not None:
        sharding = shardings.read_value(sharding, _join(path, "sharding"), len(shape))
    return Value(vid, list(shape), dtype, weak, producer, literal, kind, stats=stats, sharding=sharding)


def _frame(data: Any, path: str) -> Frame:
    d = _obj(data, path, ("path", "line", "column", "endLine", "endColumn"), _FRAME_OPTIONAL_KEYS)
    return Frame(
        path=_str(d["path"], _join(path, "path"), nonempty=True),
        line=_int(d["line"], _join(path, "line"), 1),
        column=_int(d["column"], _join(path, "column"), 0),
        end_line=_int(d["endLine"], _join(path, "endLine"), 1),
        end_column=_int(d["endColumn"], _join(path, "endColumn"), 0),
        function=_opt_str(d.get("function"), _join(path, "function")),
        package=_opt_str(d.get("package"), _join(path, "package"), nonempty=True),
        cell=None if d.get("cell") is None else _int(d["cell"], _join(path, "cell"), 0),
    )


def _port(data: Any, path: str, roles: tuple[str, ...]) -> Port:
    d = _obj(data, path, ("value", "label", "role"))
    return Port(
        value=_str(d["value"], _join(path, "value"), nonempty=True),
        label=_str(d["label"], _join(path, "label")),
        role=_enum(d["role"], _join(path, "role"), roles),
    )


def _frame_ref(data: Any, path: str, table: list[Frame] | None) -> Frame:
    if table is None:
        return _frame(data, path)
    if type(data) is not int or not 0 <= data < len(table):
        raise _fail(path, f"expected an index into {FRAME_TABLE} (0 to {len(table) - 1}), got {_kind(data)}")
    return table[data]


def _costs(data: Any, path: str) -> dict[str, Any]:
    """A node's ``costs``: ``flops``, ``bytes``, ``transcendentals``, ``runs`` (integers >= 0) and
    optionally ``trips``, ``branch`` (integers >= 0), ``tripsStatic`` (boolean), ``unknown`` (why
    XLA gave no figures)."""
    d = _obj(data, path, COST_KEYS, _COST_OPTIONAL)
    out: dict[str, Any] = {key: _int(d[key], _join(path, key), 0) for key in COST_KEYS}
    for key in ("trips", "branch"):
        if key in d:
            out[key] = _int(d[key], _join(path, key), 0)
    if "tripsStatic" in d:
        out["tripsStatic"] = _bool(d["tripsStatic"], _join(path, "tripsStatic"))
    if "unknown" in d:
        out["unknown"] = _str(d["unknown"], _join(path, "unknown"))
    return out


def _node(data: Any, path: str, table: list[Frame] | None = None) -> Node:
    d = _obj(data, path, _NODE_KEYS, _NODE_OPTIONAL)
    params = d["params"]
    if not isinstance(params, dict):
        raise _fail(_join(path, "params"), f"expected an object, got {_kind(params)}")
    frames_path = _join(path, "frames")
    return Node(
        id=_str(d["id"], _join(path, "id"), nonempty=True),
        primitive=_str(d["primitive"], _join(path, "primitive"), nonempty=True),
        params=_json_copy(params, _join(path, "params")),
        inputs=_strs(d["inputs"], _join(path, "inputs")),
        outputs=_strs(d["outputs"], _join(path, "outputs")),
        scope=_str(d["scope"], _join(path, "scope")),
        group=_opt_str(d["group"], _join(path, "group"), nonempty=True),
        source=None if d["source"] is None else _frame_ref(d["source"], _join(path, "source"), table),
        frames=[_frame_ref(f, f"{frames_path}[{i}]", table) for i, f in enumerate(_list(d["frames"], frames_path))],
        transforms=_strs(d["transforms"], _join(path, "transforms")),
        costs=None if d.get("costs") is None else _costs(d["costs"], _join(path, "costs")),
    )


def _shape(data: Any, path: str) -> list[int | str]:
    dims = _list(data, path)
    for i, dim in enumerate(dims):
        if isinstance(dim, str):
            if not dim:
                raise _fail(f"{path}[{i}]", "expected a non-empty symbolic dimension")
        elif isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise _fail(f"{path}[{i}]", f"expected an integer >= 0 or a symbolic dimension, got {_kind(dim)}")
    return list(dims)


def _value(data: Any, path: str) -> Value:
    d = _obj(
        data,
        path,
        ("id", "shape", "dtype", "weakType", "producer", "kind"),
        ("literal", "perDevice", "globalShape", "stats", "sharding"),
    )
    per_device = _bool(d["perDevice"], _join(path, "perDevice")) if "perDevice" in d else False
    global_shape = _shape(d["globalShape"], _join(path, "globalShape")) if "globalShape" in d else None
    stats = d.get("stats")
    shape = _shape(d["shape"], _join(path, "shape"))
    sharding = d.get("sharding")
    return Value(
        id=_str(d["id"], _join(path, "id"), nonempty=True),
        shape=shape,
        dtype=_str(d["dtype"], _join(path, "dtype"), nonempty=True),
        weak_type=_bool(d["weakType"], _join(path, "weakType")),
        producer=_opt_str(d["producer"], _join(path, "producer"), nonempty=True),
        literal=_json_copy(d.get("literal"), _join(path, "literal")),
        kind=_enum(d["kind"], _join(path, "kind"), VALUE_KINDS),
        per_device=per_device,
        global_shape=global_shape,
        stats=None if stats is None else _stats(stats, _join(path, "stats")),
        sharding=None if sharding is None else shardings.read_value(sharding, _join(path, "sharding"), len(shape)),
    )


# Statistics and execution (a values run): optional everywhere, so shapes-only graphs are unchanged.

STATS_COUNTS = ("count", "finite", "nan", "posInf", "negInf")
STATS_NUMBERS = ("min", "max", "mean", "std", "meanAbs")
HISTOGRAM_BINS = 32
VALIDATION_STATUSES = ("verified", "partial", "mismatch")


def _number(data: Any, path: str, *, nullable: bool = False) -> float | None:
    """A JSON number, or a non-finite one spelled ``{"float": ...}``; null when ``nullable``."""
    if data is None and nullable:
        return None
    if isinstance(data, dict) and len(data) == 1 and data.get("float") in _NONFINITE:
        return _NONFINITE[data["float"]]
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise _fail(path, f"expected a number{' or null' if nullable else ''}, got {_kind(data)}")
    if isinstance(data, float) and not math.isfinite(data):
        raise _fail(path, 'non-finite number: write it as {"float": "nan" | "inf" | "-inf"}')
    return float(data)


def _stats(data: Any, path: str) -> dict[str, Any]:
    """A value's ``stats`` object (docs/graph-format.md "Statistics"), non-finite numbers as floats."""
    optional = ("iterations", "firstNonFiniteIteration")
    d = _obj(data, path, (*STATS_COUNTS, "zeros", *STATS_NUMBERS, "histogram"), optional)
    out: dict[str, Any] = {}
    for key in STATS_COUNTS:
        out[key] = _int(d[key], _join(path, key), 0)
    zeros = _number(d["zeros"], _join(path, "zeros"))
    if zeros is None or not 0 <= zeros <= 1:
        raise _fail(_join(path, "zeros"), f"expected a fraction from 0 to 1, got {zeros}")
    out["zeros"] = zeros
    for key in STATS_NUMBERS:
        out[key] = _number(d[key], _join(path, key), nullable=True)
    hist = d["histogram"]
    if hist is None:
        out["histogram"] = None
    else:
        hp = _join(path, "histogram")
        h = _obj(hist, hp, ("lo", "hi", "counts"), ("approximate", "sampled"))
        counts = _list(h["counts"], _join(hp, "counts"))
        if len(counts) != HISTOGRAM_BINS:
            raise _fail(_join(hp, "counts"), f"expected {HISTOGRAM_BINS} bins, got {len(counts)}")
        out["histogram"] = {
            "lo": _number(h["lo"], _join(hp, "lo")),
            "hi": _number(h["hi"], _join(hp, "hi")),
            "counts": [_int(c, f"{_join(hp, 'counts')}[{i}]", 0) for i, c in enumerate(counts)],
        }
        for flag in ("approximate", "sampled"):
            if flag in h:
                out["histogram"][flag] = _bool(h[flag], _join(hp, flag))
    if "iterations" in d:
        out["iterations"] = _int(d["iterations"], _join(path, "iterations"), 1)
    if "firstNonFiniteIteration" in d:
        where = _join(path, "firstNonFiniteIteration")
        out["firstNonFiniteIteration"] = [
            _int(i, f"{where}[{k}]", 1) for k, i in enumerate(_list(d["firstNonFiniteIteration"], where))
        ]
    return out


def _execution(data: Any, path: str) -> dict[str, Any]:
    """The ``execution`` object of a values run: checked where readers rely on it, copied whole."""
    d = _obj(
        data,
        path,
        ("device", "seconds", "validation", "executed"),
        ("firstNonFinite", "gradients"),
    )
    _str(d["device"], _join(path, "device"))
    _number(d["seconds"], _join(path, "seconds"))
    vp = _join(path, "validation")
    validation = _open_obj(d["validation"], vp, ("status",))
    _enum(validation["status"], _join(vp, "status"), VALIDATION_STATUSES)
    executed = d["executed"]
    if not isinstance(executed, dict):
        raise _fail(_join(path, "executed"), f"expected an object, got {_kind(executed)}")
    for key, count in executed.items():
        _int(count, f"{_join(path, 'executed')}[{json.dumps(key)}]", 0)
    first = d.get("firstNonFinite")
    if first is not None:
        fp = _join(path, "firstNonFinite")
        f = _open_obj(first, fp, ("node", "value", "primitive", "kind", "message"))
        for key in ("node", "value", "primitive", "kind", "message"):
            _str(f[key], _join(fp, key), nonempty=True)
    copied: dict[str, Any] = _json_copy(d, path)
    return copied


def _group(data: Any, path: str) -> Group:
    d = _obj(data, path, ("id", "kind", "parent", "label", "node"))
    return Group(
        id=_str(d["id"], _join(path, "id"), nonempty=True),
        kind=_str(d["kind"], _join(path, "kind"), nonempty=True),
        parent=_opt_str(d["parent"], _join(path, "parent"), nonempty=True),
        label=_str(d["label"], _join(path, "label")),
        node=_opt_str(d["node"], _join(path, "node"), nonempty=True),
    )


def _coverage(data: Any, path: str) -> Coverage:
    d = _obj(data, path, ("scope", "complete", "opaque", "notes", "effects"))
    if d["scope"] != "traced_program":
        raise _fail(_join(path, "scope"), f"expected 'traced_program', got {json.dumps(d['scope'], default=repr)}")
    opaque_path = _join(path, "opaque")
    opaque = []
    for i, item in enumerate(_list(d["opaque"], opaque_path)):
        p = f"{opaque_path}[{i}]"
        o = _obj(item, p, ("node", "reason"))
        _str(o["node"], _join(p, "node"), nonempty=True)
        _str(o["reason"], _join(p, "reason"))
        opaque.append({"node": o["node"], "reason": o["reason"]})
    complete = _bool(d["complete"], _join(path, "complete"))
    if complete and opaque:
        raise _fail(_join(path, "complete"), "true although opaque regions are listed")
    return Coverage(
        scope="traced_program",
        complete=complete,
        opaque=opaque,
        notes=_strs(d["notes"], _join(path, "notes")),
        effects=_strs(d["effects"], _join(path, "effects")),
    )


def _items(data: dict[str, Any], key: str, fast: Any, read: Any) -> list[Any]:
    out = []
    for i, item in enumerate(_list(data[key], key)):
        path = f"{key}[{i}]"
        record = fast(item, path)
        out.append(record if record is not None else read(item, path))
    return out


def from_json(data: Any) -> Graph:
    """The :class:`Graph` of a JSON form: expanded (version 1), compact (version 2, see
    :func:`to_compact`) or the packed transport of earlier workers; ``ValueError`` naming the key
    path when malformed."""
    with collector.paused():
        if isinstance(data, dict) and data.get("version") == COMPACT_VERSION and data.get("format") == FORMAT:
            from jaxlsp.graph import compact

            return compact.from_compact(data)
        return _from_json(data)


def _from_json(data: Any) -> Graph:
    d = _obj(data, "", _TOP_KEYS, (FRAME_TABLE, *_OPTIONAL_TOP_KEYS))
    table: list[Frame] | None = None
    if FRAME_TABLE in d:
        entries = _list(d[FRAME_TABLE], FRAME_TABLE)
        table = [_frame_fast(f) or _frame(f, f"{FRAME_TABLE}[{i}]") for i, f in enumerate(entries)]
    if d["format"] != FORMAT:
        raise _fail("format", f"expected {FORMAT!r}, got {json.dumps(d['format'], default=repr)}: not a jaxlsp graph")
    version = _int(d["version"], "version", 1)
    if version != VERSION:
        raise _fail(
            "version", f"unsupported version {version} (this jaxlsp reads versions {VERSION} and {COMPACT_VERSION})"
        )
    if d["backend"] != BACKEND:
        raise _fail("backend", f"expected {BACKEND!r}, got {json.dumps(d['backend'], default=repr)}")

    versions = _open_obj(d["versions"], "versions", VERSION_KEYS)
    for key, v in versions.items():
        _opt_str(v, _join("versions", key))

    target = _open_obj(d["target"], "target", ("path", "name", "kind"))
    for key in ("path", "name", "kind"):
        _str(target[key], _join("target", key))
    profile = _open_obj(d["profile"], "profile", ("name",))
    _opt_str(profile["name"], "profile.name")

    sources = d["sources"]
    if not isinstance(sources, dict):
        raise _fail("sources", f"expected an object, got {_kind(sources)}")
    for key, digest in sources.items():
        _str(digest, f"sources[{json.dumps(key)}]")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise _fail(f"sources[{json.dumps(key)}]", "expected a sha256 as 64 lowercase hex digits")

    return Graph(
        target=_json_copy(target, "target"),
        profile=_json_copy(profile, "profile"),
        versions=dict(versions),
        coverage=_coverage(d["coverage"], "coverage"),
        sources=dict(sources),
        inputs=[_port(p, f"inputs[{i}]", INPUT_ROLES) for i, p in enumerate(_list(d["inputs"], "inputs"))],
        outputs=[_port(p, f"outputs[{i}]", OUTPUT_ROLES) for i, p in enumerate(_list(d["outputs"], "outputs"))],
        nodes=_items(d, "nodes", lambda n, p: _node_fast(n, p, table), lambda n, p: _node(n, p, table)),
        values=_items(d, "values", _value_fast, _value),
        groups=_items(d, "groups", lambda _d, _p: None, _group),
        costs=_graph_costs(d.get("costs")),
        execution=None if d.get("execution") is None else _execution(d["execution"], "execution"),
        contracts=None if d.get("contracts") is None else _contracts(d["contracts"], "contracts"),
        mesh=None if d.get("mesh") is None else shardings.read_mesh(d["mesh"], "mesh"),
        compiled=None if d.get("compiled") is None else _compiled(d["compiled"], "compiled"),
        time=None if d.get("time") is None else _time(d["time"], "time"),
        format=FORMAT,
        version=VERSION,
        backend=BACKEND,
    )


def _contracts(data: Any, path: str) -> dict[str, Any]:
    """The ``contracts`` section: each violation's members that readers rely on are checked."""
    d = _obj(data, path, ("checked", "violations"), ("notes", "dims"))
    for i, item in enumerate(_list(d.get("dims", []), f"{path}.dims")):
        where = f"{path}.dims[{i}]"
        v = _obj(item, where, ("function", "path", "line", "endLine", "dims"), ())
        sizes = v["dims"]
        if not isinstance(sizes, dict):
            raise _fail(f"{where}.dims", f"expected an object, got {_kind(sizes)}")
        for name, size in sizes.items():
            if not isinstance(size, int) or isinstance(size, bool):
                raise _fail(f"{where}.dims.{name}", f"expected a size (an integer), got {_kind(size)}")
    for i, name in enumerate(_list(d["checked"], f"{path}.checked")):
        _str(name, f"{path}.checked[{i}]")
    for i, item in enumerate(_list(d["violations"], f"{path}.violations")):
        where = f"{path}.violations[{i}]"
        v = _obj(item, where, ("function", "param", "annotation", "got", "message", "source", "bindings"), ())
        for key in ("function", "param", "annotation", "got", "message"):
            _str(v[key], f"{where}.{key}")
        _list(v["bindings"], f"{where}.bindings")
        _obj(v["source"], f"{where}.source", ("path", "line", "column", "endLine", "endColumn"), ("cell",))
    copied: dict[str, Any] = _json_copy(d, path)
    return copied


def _compiled(data: Any, path: str) -> dict[str, Any]:
    """The ``compiled`` section (jaxlsp.graph.compiled reads it): the members readers rely on are
    checked, the rest copied whole."""
    d = _open_obj(data, path, ("platform",))
    _str(d["platform"], _join(path, "platform"))
    if d.get("error") is not None:
        _str(d["error"], _join(path, "error"))
    for i, item in enumerate(_list(d.get("collectives", []), _join(path, "collectives"))):
        where = f"{_join(path, 'collectives')}[{i}]"
        c = _open_obj(item, where, ("kind", "instruction", "shape", "bytes", "nodes", "scope", "source"))
        for key in ("kind", "instruction", "shape", "scope"):
            _str(c[key], _join(where, key))
        _int(c["bytes"], _join(where, "bytes"), 0)
        for k, nid in enumerate(_list(c["nodes"], _join(where, "nodes"))):
            _str(nid, f"{_join(where, 'nodes')}[{k}]", nonempty=True)
        if c["source"] is not None:
            s = _open_obj(c["source"], _join(where, "source"), ("path", "line"))
            _str(s["path"], _join(where, "source.path"))
            _int(s["line"], _join(where, "source.line"), 0)
    for i, item in enumerate(_list(d.get("modules", []), _join(path, "modules"))):
        where = f"{_join(path, 'modules')}[{i}]"
        m = _open_obj(item, where, ("scope", "flops", "bytes", "collectiveBytes", "collectives"))
        _str(m["scope"], _join(where, "scope"))
        for key in ("flops", "bytes", "collectiveBytes", "collectives"):
            _int(m[key], _join(where, key), 0)
    copied: dict[str, Any] = _json_copy(d, path)
    return copied


_TIME_KEYS = ("platform", "device", "devices", "timeline", "repeat", "warmup", "step", "steps", "compile")
_TIME_FIGURES = ("busy", "attributed", "split", "nodes", "lines", "modules", "ops", "notes", "phases")


def _time(data: Any, path: str) -> dict[str, Any]:
    """The ``time`` section (jaxlsp.graph.timing): what readers total up is checked."""
    d = _obj(data, path, _TIME_KEYS + _TIME_FIGURES, ())

    def seconds(value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise _fail(where, f"expected seconds (a number >= 0), got {_kind(value)}")

    for key in ("step", "compile", "busy", "attributed"):
        seconds(d[key], _join(path, key))
    for key in ("repeat", "devices"):
        _int(d[key], _join(path, key), 1)
    _int(d["warmup"], _join(path, "warmup"), 0)
    for i, s in enumerate(_list(d["steps"], _join(path, "steps"))):
        seconds(s, f"{path}.steps[{i}]")
    nodes = d["nodes"]
    if not isinstance(nodes, dict):
        raise _fail(_join(path, "nodes"), f"expected an object, got {_kind(nodes)}")
    for nid, s in nodes.items():
        seconds(s, f"{path}.nodes.{nid}")
    for key, required, optional in (
        ("lines", ("path", "line", "seconds"), ("cell",)),
        ("modules", ("module", "seconds"), ()),
        ("ops", ("name", "opcode", "seconds", "count", "nodes"), ()),
    ):
        for i, item in enumerate(_list(d[key], _join(path, key))):
            where = f"{path}.{key}[{i}]"
            _obj(item, where, required, optional)
            seconds(item["seconds"], f"{where}.seconds")
            if key == "ops":
                _strs(item["nodes"], f"{where}.nodes")
    _strs(d["notes"], _join(path, "notes"))
    phases = d["phases"]
    if not isinstance(phases, dict):
        raise _fail(_join(path, "phases"), f"expected an object, got {_kind(phases)}")
    for name, s in phases.items():
        seconds(s, f"{path}.phases.{name}")
    copied: dict[str, Any] = _json_copy(d, path)
    return copied


def _graph_costs(data: Any) -> dict[str, Any] | None:
    if data is None:
        return None
    d = _obj(data, "costs", ("platform",), _GRAPH_COST_KEYS)
    _str(d["platform"], "costs.platform")
    copied: dict[str, Any] = _json_copy(d, "costs")
    return copied


def loads(text: str | bytes, sliced: bool = False) -> Graph:
    """The :class:`Graph` of a graph file's text; ``ValueError`` when it is not valid JSON or malformed.
    ``sliced``: parsed a node at a time (``slices.py``), for a thread beside the server's loop."""
    try:
        data = slices.loads(text, depth=2) if sliced else json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"<graph>: not JSON: {exc}") from None
    graph = from_json(data)
    if sliced:  # beside the loop: let go of the JSON a piece at a time (freed at once: the GIL for 0.8 s)
        slices.release(data)
    return graph


def read(path: str | os.PathLike[str]) -> Graph:
    """The :class:`Graph` saved at ``path``."""
    return loads(Path(path).read_bytes())
