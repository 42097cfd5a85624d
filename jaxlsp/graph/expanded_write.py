"""The expanded form (version 1, docs/graph-format.md) written from the model objects: every node
and value an object, keys in the format's order and spelling (camelCase).

Stdlib only, Python >= 3.10: the capture worker imports this module inside the user's interpreter.
Non-finite floats in ``params``, ``literal`` and ``stats`` (``-inf`` attention masks, ``nan``
fills) have no JSON spelling and are written as ``{"float": "nan" | "inf" | "-inf"}``. The
readers are :mod:`jaxlsp.graph.expanded_read` and :mod:`jaxlsp.graph.expanded_rows`; the compact
form's writer (:mod:`jaxlsp.graph.compact_write`) uses the row writers here for the members it
keeps as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from jaxlsp.graph.model import FRAME_TABLE, Frame, Graph, Group, Node, Port, Value


def jsonable(obj: Any) -> Any:
    """A JSON-safe copy: dict keys sorted, tuples as lists, non-finite floats as ``{"float": ...}``."""
    if isinstance(obj, dict):
        return {str(k): jsonable(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, (list, tuple)):
        return [jsonable(x) for x in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    return obj


def _frame_json(frame: Frame) -> dict[str, Any]:
    out: dict[str, Any] = frame.range_json()
    if frame.function is not None:
        out["function"] = frame.function
    if frame.package is not None:
        out["package"] = frame.package
    if frame.cell is not None:  # after function and package, as the file has always written it
        out["cell"] = out.pop("cell")
    return out


def _port_json(port: Port) -> dict[str, Any]:
    return {"value": port.value, "label": port.label, "role": port.role}


def node_json(node: Node, frame: Callable[[Frame], Any] = _frame_json) -> dict[str, Any]:
    """A node's version 1 object, its frames written by ``frame``."""
    return {
        "id": node.id,
        "primitive": node.primitive,
        "params": jsonable(node.params),
        "inputs": list(node.inputs),
        "outputs": list(node.outputs),
        "scope": node.scope,
        "group": node.group,
        "source": None if node.source is None else frame(node.source),
        "frames": [frame(f) for f in node.frames],
        "transforms": list(node.transforms),
        **({} if node.costs is None else {"costs": dict(node.costs)}),
    }


def value_json(value: Value) -> dict[str, Any]:
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
        yield "literal", jsonable(value.literal)
    if value.per_device:
        yield "perDevice", True
    if value.global_shape is not None:
        yield "globalShape", list(value.global_shape)
    if value.stats is not None:
        yield "stats", jsonable(value.stats)
    if value.sharding is not None:
        yield "sharding", jsonable(value.sharding)


def _group_json(group: Group) -> dict[str, Any]:
    return {"id": group.id, "kind": group.kind, "parent": group.parent, "label": group.label, "node": group.node}


def to_json(graph: Graph) -> dict[str, Any]:
    """The JSON form of ``graph`` (plain dicts and lists, keys in the format's order)."""
    cov = graph.coverage
    data = {
        "format": graph.format,
        "version": graph.version,
        "backend": graph.backend,
        "versions": jsonable(graph.versions),
        "target": jsonable(graph.target),
        "profile": jsonable(graph.profile),
        "coverage": {
            "scope": cov.scope,
            "complete": cov.complete,
            "opaque": [jsonable(o) for o in cov.opaque],
            "notes": list(cov.notes),
            "effects": list(cov.effects),
        },
        "sources": {k: graph.sources[k] for k in sorted(graph.sources)},
        "inputs": [_port_json(p) for p in graph.inputs],
        "outputs": [_port_json(p) for p in graph.outputs],
        "nodes": [node_json(n) for n in graph.nodes],
        "values": [value_json(v) for v in graph.values],
        "groups": [_group_json(g) for g in graph.groups],
        **({} if graph.costs is None else {"costs": jsonable(graph.costs)}),
    }
    if graph.execution is not None:
        data["execution"] = jsonable(graph.execution)
    if graph.contracts is not None:
        data["contracts"] = jsonable(graph.contracts)
    if graph.mesh is not None:
        data["mesh"] = jsonable(graph.mesh)
    if graph.compiled is not None:
        data["compiled"] = jsonable(graph.compiled)
    if graph.time is not None:
        data["time"] = jsonable(graph.time)
    return data


def to_frame_table(graph: Graph) -> dict[str, Any]:
    """:func:`to_json` with each distinct frame written once in ``frameTable`` and nodes'
    ``source`` and ``frames`` as indices into it: the pipe form of earlier workers (a large model
    repeats a few hundred frames in thousands of stacks), still read by ``io.from_json``, which
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
    data["nodes"] = [node_json(n, at) for n in graph.nodes]
    data[FRAME_TABLE] = table
    return data
