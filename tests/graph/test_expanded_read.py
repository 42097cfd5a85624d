"""The expanded form (version 1) read back strictly (jaxlsp.graph.expanded_read and its rows,
expanded_rows): malformed input raises a ValueError naming the key path, and the schema refuses
it too."""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.expanded_write import to_frame_table
from jaxlsp.graph.model import Frame
from tests.graph.forms import schema_errors, sharded, with_values
from tests.graph.test_samples import small_graph

# Malformed input: a ValueError naming the key path (and the schema refuses it too)


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    target: Any = data
    for key in keys[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value


_DELETE = object()

MALFORMED = [
    ("format", "other", r"^format: expected 'jaxlsp\.graph'"),
    ("version", 3, r"^version: unsupported version 3 \(this jaxlsp reads versions 1 and 2\)"),
    ("version", "1", r"^version: expected an integer, got a string"),
    ("backend", "hlo", r"^backend: expected 'jaxpr'"),
    ("versions.jax", _DELETE, r"^versions: missing key 'jax'"),
    ("versions.flax", 12, r"^versions\.flax: expected a string or null, got an integer"),
    ("target.name", _DELETE, r"^target: missing key 'name'"),
    ("profile", [], r"^profile: expected an object, got an array"),
    ("coverage.scope", "executed", r"^coverage\.scope: expected 'traced_program'"),
    ("coverage.complete", "yes", r"^coverage\.complete: expected a boolean"),
    ("coverage.opaque", [{"node": "n2", "reason": "callback"}], r"^coverage\.complete: true although opaque"),
    ("coverage.opaque", [{"node": "n2"}], r"^coverage\.opaque\[0\]: missing key 'reason'"),
    ("sources.model\\.py", "abc", None),
    ("inputs.1.role", "weights", r"^inputs\[1\]\.role: expected one of parameter, state, input, key, constant"),
    ("outputs.0.role", "parameter", r"^outputs\[0\]\.role: expected one of output, state"),
    ("outputs.0", "v10", r"^outputs\[0\]: expected an object, got a string"),
    ("nodes.0.inputs.1", 7, r"^nodes\[0\]\.inputs\[1\]: expected a string, got an integer"),
    ("nodes.0.source.endLine", _DELETE, r"^nodes\[0\]\.source: missing key 'endLine'"),
    ("nodes.0.source.line", 0, r"^nodes\[0\]\.source\.line: expected an integer >= 1, got 0"),
    ("nodes.0.source.column", True, r"^nodes\[0\]\.source\.column: expected an integer, got a boolean"),
    ("nodes.0.frames.1.path", "", r"^nodes\[0\]\.frames\[1\]\.path: expected a non-empty string"),
    ("nodes.0.params", None, r"^nodes\[0\]\.params: expected an object, got null"),
    ("nodes.0.params.x", math.inf, r"^nodes\[0\]\.params\.x: non-finite number"),
    ("nodes.2.group", "", r"^nodes\[2\]\.group: expected a non-empty string or null"),
    ("nodes.3.transforms", "vmap", r"^nodes\[3\]\.transforms: expected an array, got a string"),
    ("nodes.4.weakType", False, r"^nodes\[4\]\.weakType: unknown key"),
    ("nodes.5.primitive", "", r"^nodes\[5\]\.primitive: expected a non-empty string"),
    ("values.2.shape.0", -1, r"^values\[2\]\.shape\[0\]: expected an integer >= 0 or a symbolic dimension"),
    ("values.2.shape.1", 3.5, r"^values\[2\]\.shape\[1\]: expected an integer >= 0 or a symbolic dimension"),
    ("values.4.weakType", _DELETE, r"^values\[4\]: missing key 'weakType'"),
    ("values.4.weak_type", False, r"^values\[4\]\.weak_type: unknown key"),
    ("values.7.kind", "literally", r"^values\[7\]\.kind: expected one of var, literal, const"),
    ("values.7.producer", 3, r"^values\[7\]\.producer: expected a string or null, got an integer"),
    ("groups.1.parent", ["g0"], r"^groups\[1\]\.parent: expected a string or null, got an array"),
    ("groups.3.node", _DELETE, r"^groups\[3\]: missing key 'node'"),
    ("nodes", {}, r"^nodes: expected an array, got an object"),
    ("extra", 1, r"^extra: unknown key"),
]


@pytest.mark.parametrize(("path", "value", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_names_the_key_path(path: str, value: Any, message: str | None) -> None:
    data = io.to_json(small_graph())
    if path.startswith("sources."):
        data["sources"]["model.py"] = value
        message = r'^sources\["model\.py"\]: expected a sha256'
    else:
        _set(data, path, value)
    with pytest.raises(ValueError, match=message):
        io.from_json(data)
    if not (isinstance(value, float) and not math.isfinite(value)):
        assert schema_errors(copy.deepcopy(data)), f"the schema accepts {path} = {value!r}"


def test_a_renamed_nullable_key_is_not_read_as_null() -> None:
    data = io.to_json(small_graph())
    data["nodes"][2]["grp"] = data["nodes"][2].pop("group")
    with pytest.raises(ValueError, match=r"^nodes\[2\]: missing key 'group'"):
        io.from_json(data)
    data = io.to_json(small_graph())
    data["values"][0]["literal"] = data["values"][0].pop("producer")
    with pytest.raises(ValueError, match=r"^values\[0\]: missing key 'producer'"):
        io.from_json(data)
    data = io.to_json(small_graph())
    data["nodes"][0]["source"]["func"] = data["nodes"][0]["source"].pop("function")
    with pytest.raises(ValueError, match=r"^nodes\[0\]\.source\.func: unknown key"):
        io.from_json(data)


def test_malformed_top_level() -> None:
    with pytest.raises(ValueError, match=r"^<graph>: expected an object, got an array"):
        io.from_json([])
    with pytest.raises(ValueError, match=r"^<graph>: missing key 'nodes'"):
        io.from_json({k: v for k, v in io.to_json(small_graph()).items() if k != "nodes"})
    with pytest.raises(ValueError, match=r"^<graph>: not JSON"):
        io.loads("{")


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("source", 99, "nodes[0].source: expected an index into frameTable (0 to"),
        ("frames", ["x"], "nodes[0].frames[0]: expected an index into frameTable"),
        ("frames", [-1], "nodes[0].frames[0]: expected an index into frameTable"),
    ],
)
def test_bad_packed_indices_name_the_key(where: str, value: Any, message: str) -> None:
    graph = small_graph()
    graph.nodes[0].frames = [Frame("model.py", 1, 0, 1, 2)]
    graph.nodes[0].source = graph.nodes[0].frames[0]
    packed = to_frame_table(graph)
    packed["nodes"][0][where] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        io.from_json(packed)


def test_an_object_with_a_float_key_that_is_not_a_spelling_stays_an_object() -> None:
    graph = small_graph()
    graph.target["extra"] = {"float": []}  # found by hypothesis: once a TypeError (unhashable list)
    assert io.loads(io.dumps(graph)).target["extra"] == {"float": []}


# --- statistics and execution (a values run), shardings (explicit sharding): optional, checked ---


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("values[0].stats.nan", -1, "values[0].stats.nan: expected an integer >= 0, got -1"),
        ("values[0].stats.zeros", 1.5, "values[0].stats.zeros: expected a fraction from 0 to 1"),
        ("values[0].stats.histogram.counts", [1, 2], "values[0].stats.histogram.counts: expected 32 bins, got 2"),
        ("values[0].stats.mean", "high", "values[0].stats.mean: expected a number or null, got a string"),
        ("values[0].stats.extra", 1, "values[0].stats.extra: unknown key"),
        ("execution.validation.status", "fine", "execution.validation.status: expected one of verified, partial"),
        ("execution.executed.g0", -2, 'execution.executed["g0"]: expected an integer >= 0, got -2'),
    ],
)
def test_malformed_statistics_name_the_key_path(where: str, value: Any, message: str) -> None:
    data = io.to_json(with_values(small_graph()))
    node: Any = data
    *parents, last = re.split(r"\.(?![^\[]*\])", where)
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index[:-1])] if index else node[name]
    node[last] = value
    with pytest.raises(ValueError) as info:
        io.from_json(data)
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("values[0].sharding.spec", [], "values[0].sharding.spec: expected 2 entries (one per dimension of the shape)"),
        ("values[0].sharding.spec", [[], None], "values[0].sharding.spec[0]: expected null or a non-empty array"),
        ("values[0].sharding.spec", [["x"], 3], "values[0].sharding.spec[1]: expected an array, got an integer"),
        ("values[1].sharding.unreduced", "x", "values[1].sharding.unreduced: expected an array, got a string"),
        ("values[1].sharding.partial", ["x"], "values[1].sharding.partial: unknown key"),
        ("mesh.axisSizes", [4], "mesh.axisSizes: expected 2 entries (one per axis name), got 1"),
        ("mesh.axisSizes", [4, 0], "mesh.axisSizes[1]: expected an integer >= 1, got 0"),
        ("mesh.shape", {}, "mesh.shape: unknown key"),
    ],
)
def test_malformed_shardings_name_the_key_path(where: str, value: Any, message: str) -> None:
    data = io.to_json(sharded(small_graph()))
    node: Any = data
    *parents, last = where.split(".")
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index[:-1])] if index else node[name]
    node[last] = value
    with pytest.raises(ValueError) as info:
        io.from_json(data)
    assert str(info.value).startswith(message), str(info.value)
