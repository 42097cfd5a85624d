"""The graph file: JSON form against schema.json, strict reading, round trips."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from jaxlsp.graph import io
from jaxlsp.graph.model import Coverage, Frame, Graph, Group, Node, Port, Value
from jaxlsp.graph.validate import check, load_schema
from tests.graph.test_samples import SHA, chain_graph, small_graph

VALIDATOR = Draft202012Validator(load_schema())


def schema_errors(data: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(data)]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(load_schema())


def test_json_form_validates_and_round_trips() -> None:
    graph = small_graph()
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert io.from_json(data) == graph
    assert io.loads(io.dumps(graph)) == graph
    assert io.from_json(json.loads(json.dumps(data))) == graph


def test_json_form_uses_the_format_keys() -> None:
    data = io.to_json(small_graph())
    assert list(data) == [
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
    ]
    assert (data["format"], data["version"], data["backend"]) == ("jaxlsp.graph", 1, "jaxpr")
    assert data["nodes"][0]["source"] == {
        "path": "model.py",
        "line": 5,
        "column": 8,
        "endLine": 5,
        "endColumn": 20,
        "function": "MLP.__call__",
    }
    assert data["nodes"][4]["source"] == {"path": "model.py", "line": 7, "column": 11, "endLine": 7, "endColumn": 18}
    assert data["nodes"][3]["source"] is None
    assert data["values"][2] == {
        "id": "v2",
        "shape": ["b", 3],
        "dtype": "float32",
        "weakType": False,
        "producer": None,
        "kind": "var",
    }
    assert data["values"][7]["literal"] == 0.0 and data["values"][7]["weakType"] is True
    assert data["values"][9]["literal"] == [1.0, 2.0, 3.0, 4.0]
    assert data["groups"][2] == {"id": "g2", "kind": "jit", "parent": None, "label": "jit(relu)", "node": "n2"}
    assert data["coverage"] == {
        "scope": "traced_program",
        "complete": True,
        "opaque": [],
        "notes": ["control-flow bodies are traced, not executed"],
        "effects": [],
    }


def test_dumps_is_compact_and_deterministic() -> None:
    a = small_graph()
    b = small_graph()
    b.nodes[0].params = dict(reversed(list(b.nodes[0].params.items())))
    b.target = dict(reversed(list(b.target.items())))
    assert io.dumps(a) == io.dumps(b)
    text = io.dumps(a)
    assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)


def test_non_finite_floats_are_spelled_as_objects() -> None:
    graph = small_graph()
    graph.values[7].literal = -math.inf
    graph.nodes[0].params["fill"] = [math.nan, math.inf]
    text = io.dumps(graph)
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text)
    assert data["values"][7]["literal"] == {"float": "-inf"}
    assert data["nodes"][0]["params"]["fill"] == [{"float": "nan"}, {"float": "inf"}]
    assert schema_errors(data) == []
    back = io.loads(text)
    assert back.values[7].literal == -math.inf
    fill = back.nodes[0].params["fill"]
    assert math.isnan(fill[0]) and fill[1] == math.inf


def test_write_and_read(tmp_path: Path) -> None:
    graph = small_graph()
    graph.target["path"] = "modèle/ü.py"  # non-ASCII survives as UTF-8
    path = tmp_path / "graph.json"
    io.write(graph, path)
    assert io.read(path) == graph
    assert json.loads(path.read_text(encoding="utf-8"))["target"]["path"] == "modèle/ü.py"
    assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]  # no temporary file left behind


def test_a_big_graph_round_trips() -> None:
    graph = chain_graph(2000, group_every=10)
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert io.loads(io.dumps(graph)) == graph


# --------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------
# Property: random sound graphs validate, check clean and round-trip

_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | _names
_json = st.recursive(
    _json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3), max_leaves=8
)
_frames = st.builds(
    lambda path, line, n, col, width, fn: Frame(path, line, col, line + n, col + width if n == 0 else width, fn),
    st.text(min_size=1, max_size=10),
    st.integers(1, 10_000),
    st.integers(0, 3),
    st.integers(0, 200),
    st.integers(0, 80),
    st.none() | _names,
)


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    n_inputs = draw(st.integers(0, 4))
    n_nodes = draw(st.integers(0, 12))
    n_groups = draw(st.integers(0, 5))
    groups = [
        Group(f"g{i}", draw(st.sampled_from(["module", "jit", "scan", "cond", "cond_branch", "while"])),
         draw(st.none() | st.sampled_from([f"g{j}" for j in range(i)])) if i else None, draw(_names),
         draw(st.none() | st.sampled_from([f"n{j}" for j in range(n_nodes)])) if n_nodes else None)
        for i in range(n_groups)
    ]  # fmt: skip
    dims = st.lists(st.integers(0, 64) | st.sampled_from(["b", "2*b", "seq"]), max_size=3)
    dtypes = st.sampled_from(["float32", "bfloat16", "int32", "bool", "key<fry>", "float8_e4m3fn"])
    values = [Value(f"v{i}", draw(dims), draw(dtypes), draw(st.booleans())) for i in range(n_inputs)]
    nodes = []
    for i in range(n_nodes):
        ins = draw(st.lists(st.sampled_from([v.id for v in values]), max_size=3)) if values else []
        if draw(st.booleans()):
            lit = Value(
                f"v{len(values)}",
                [],
                "float32",
                True,
                None,
                draw(_json_leaf),
                draw(st.sampled_from(["literal", "const"])),
            )
            values.append(lit)
            ins.append(lit.id)
        outs = []
        for _ in range(draw(st.integers(0, 2))):
            outs.append(f"v{len(values)}")
            values.append(Value(outs[-1], draw(dims), draw(dtypes), draw(st.booleans()), f"n{i}"))
        group = draw(st.none() | st.sampled_from([g.id for g in groups])) if groups else None
        source = draw(st.none() | _frames)
        nodes.append(
            Node(f"n{i}", draw(st.sampled_from(["add", "dot_general", "jit", "scan"])), draw(st.dictionaries(_names, _json, max_size=3)),
                 ins, outs, draw(_names), group, source, draw(st.lists(_frames, max_size=2)),
                 draw(st.lists(st.sampled_from(["vmap", "jvp", "transpose"]), max_size=2)))
        )  # fmt: skip
    ids = [v.id for v in values]
    inputs = [Port(f"v{i}", draw(_names), draw(st.sampled_from(io.INPUT_ROLES))) for i in range(n_inputs)]
    outputs = [Port(v, draw(_names), draw(st.sampled_from(io.OUTPUT_ROLES))) for v in draw(st.lists(st.sampled_from(ids), max_size=3))] if ids else []  # fmt: skip
    opaque = (
        [{"node": n.id, "reason": draw(_names)} for n in nodes if draw(st.booleans())] if draw(st.booleans()) else []
    )
    return Graph(
        target={"path": draw(_names), "name": draw(_names), "kind": "function", "extra": draw(_json)},
        profile={"name": draw(st.none() | _names)},
        versions={k: draw(st.none() | _names) for k in io.VERSION_KEYS},
        coverage=Coverage(complete=not opaque, opaque=opaque, notes=draw(st.lists(_names, max_size=2))),
        sources={draw(_names): SHA for _ in range(draw(st.integers(0, 2)))},
        inputs=inputs,
        outputs=outputs,
        nodes=nodes,
        values=values,
        groups=groups,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_round_trip(graph: Graph) -> None:
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert check(graph) == []
    assert io.loads(io.dumps(graph)) == graph


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_the_packed_transport_reads_back_the_same_graph(graph: Graph) -> None:
    assert io.FRAME_TABLE not in io.to_json(graph)  # never in the file format
    for packed in (io.to_compact(graph), io.to_frame_table(graph)):  # today's and earlier workers'
        assert io.from_json(json.loads(json.dumps(packed))) == graph


def test_the_packed_transport_writes_each_frame_once() -> None:
    graph = chain_graph(50)
    shared = Frame("model.py", 3, 4, 3, 9, "f")
    for node in graph.nodes:
        node.source, node.frames = shared, [shared, Frame("lib.py", 1, 0, 1, 2)]
    packed = io.to_frame_table(graph)
    assert len(packed[io.FRAME_TABLE]) == 51  # one shared + one per node (distinct objects)
    back = io.from_json(packed)
    assert back == graph and back.nodes[0].source is back.nodes[1].source  # shared on read too
    assert len(json.dumps(packed)) < len(json.dumps(io.to_json(graph)))


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
    packed = io.to_frame_table(graph)
    packed["nodes"][0][where] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        io.from_json(packed)


def test_an_object_with_a_float_key_that_is_not_a_spelling_stays_an_object() -> None:
    graph = small_graph()
    graph.target["extra"] = {"float": []}  # found by hypothesis: once a TypeError (unhashable list)
    assert io.loads(io.dumps(graph)).target["extra"] == {"float": []}


# --- statistics and execution (a values run): optional, round-tripped, checked -------------------


def _stats(**over: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "count": 6,
        "finite": 5,
        "nan": 1,
        "posInf": 0,
        "negInf": 0,
        "zeros": 1 / 6,
        "min": -1.5,
        "max": 2.0,
        "mean": 0.25,
        "std": 1.1,
        "meanAbs": 0.9,
        "histogram": {"lo": -1.5, "hi": 2.0, "counts": [1] + [0] * 30 + [4]},
        "iterations": 3,
        "firstNonFiniteIteration": [2],
    }
    stats.update(over)
    return stats


def _with_values(graph: Graph) -> Graph:
    graph.values[0].stats = _stats()
    graph.values[1].stats = _stats(mean=math.inf, histogram=None, iterations=1)
    graph.execution = {
        "device": "cpu",
        "seconds": 0.5,
        "validation": {"status": "verified", "outputs": 1, "maxAbsError": 0.0, "maxRelError": 0.0},
        "executed": {"g0": 1},
        "firstNonFinite": {"node": "n0", "value": "v0", "primitive": "log", "kind": "nan", "message": "first"},
    }
    return graph


def test_statistics_and_execution_round_trip_and_validate() -> None:
    graph = _with_values(small_graph())
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert data["values"][1]["stats"]["mean"] == {"float": "inf"}
    assert list(data)[-1] == "execution"
    assert io.from_json(data) == graph
    assert io.from_json(json.loads(io.dumps(graph))) == graph
    # A graph without them writes neither key, and reads back without them.
    plain = io.to_json(small_graph())
    assert "execution" not in plain and all("stats" not in v for v in plain["values"])
    assert io.from_json(plain).execution is None


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
    data = io.to_json(_with_values(small_graph()))
    node: Any = data
    *parents, last = re.split(r"\.(?![^\[]*\])", where)
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index[:-1])] if index else node[name]
    node[last] = value
    with pytest.raises(ValueError) as info:
        io.from_json(data)
    assert str(info.value).startswith(message), str(info.value)


# --- shardings (explicit sharding): optional, round-tripped, checked -----------------------------


def _sharded(graph: Graph) -> Graph:
    graph.mesh = {"axisNames": ["x", "y"], "axisSizes": [4, 2], "axisTypes": ["Explicit", "Explicit"]}
    rank = len(graph.values[0].shape)
    graph.values[0].sharding = {"spec": [["x", "y"]] + [None] * (rank - 1)}
    graph.values[1].sharding = {"spec": [None] * len(graph.values[1].shape), "unreduced": ["x"], "varying": ["y"]}
    return graph


def test_shardings_and_the_mesh_round_trip_and_validate() -> None:
    graph = _sharded(small_graph())
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert data["mesh"] == graph.mesh and data["values"][0]["sharding"]["spec"][0] == ["x", "y"]
    assert io.from_json(data) == graph
    assert io.from_json(json.loads(io.dumps(graph))) == graph
    # A graph on one device writes neither key, and reads back without them.
    plain = io.to_json(small_graph())
    assert "mesh" not in plain and all("sharding" not in v for v in plain["values"])
    assert io.from_json(plain).mesh is None


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
    data = io.to_json(_sharded(small_graph()))
    node: Any = data
    *parents, last = where.split(".")
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index[:-1])] if index else node[name]
    node[last] = value
    with pytest.raises(ValueError) as info:
        io.from_json(data)
    assert str(info.value).startswith(message), str(info.value)


def test_a_graph_written_in_pieces_goes_out_in_few_big_writes(tmp_path: Path) -> None:
    """A write per row let the GIL go and come back at every 8 KiB flush, and the server's event
    loop, waiting for it beside an exporting thread, starved for up to 1.1 s (issue 25)."""
    import io as stdio

    class Writes(stdio.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.sizes: list[int] = []

        def write(self, text: str) -> int:
            self.sizes.append(len(text))
            return super().write(text)

    pieces = [f'{{"id":"n{i}"}},' for i in range(100_000)]
    out = Writes()
    io._write_pieces(out, iter(pieces))
    assert out.getvalue() == "".join(pieces)
    assert len(out.sizes) <= 1 + sum(map(len, pieces)) // io.WRITE_BATCH  # 1.4 MB: 6 writes, not 100,000
    assert all(size >= io.WRITE_BATCH for size in out.sizes[:-1])
    path = tmp_path / "g.json"
    io.write_text(iter(pieces), path)
    assert path.read_text(encoding="utf-8") == "".join(pieces)
