"""The compact graph form (version 2): round trips with the expanded one, both schemas, strict
reading, its size, and the packed graph the store keeps (docs/graph-format.md "Compact form")."""

from __future__ import annotations

import copy
import gc
import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from jaxlsp.graph import compact, io
from jaxlsp.graph.compact import Packed
from jaxlsp.graph.diff import diff, diff_packed
from jaxlsp.graph.model import Coverage, Frame, Graph, Group, Node, Port, Value
from jaxlsp.graph.store import GraphStore, Trace
from jaxlsp.graph.validate import load_compact_schema, load_schema
from tests.graph.test_costs import measured_graph
from tests.graph.test_io import _with_values, graphs
from tests.graph.test_samples import SHA, chain_graph, small_graph
from tests.robustness.test_load import synthetic_graph

DOC = (Path(__file__).resolve().parents[2] / "docs" / "graph-format.md").read_text(encoding="utf-8")
EXPANDED = Draft202012Validator(load_schema())
COMPACT = Draft202012Validator(
    load_compact_schema(),
    registry=Registry().with_resource(load_schema()["$id"], Resource.from_contents(load_schema())),
)


def errors(validator: Draft202012Validator, data: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]


def doc_graph() -> Graph:
    return io.from_json(json.loads(re.findall(r"```json\n(.*?)```", DOC, re.S)[0]))


def odd_graph() -> Graph:
    """Ids that are not n0, n1, ... / v0, v1, ..., a value whose producer is not the node that
    outputs it, a notebook frame, a library frame, non-finite params."""
    lib = Frame("flax/linen/linear.py", 40, 2, 41, 9, "Dense.__call__", package="flax")
    cell = Frame("nb.ipynb", 3, 0, 3, 12, "f", cell=2)
    return Graph(
        target={"path": "nb.ipynb", "name": "f", "kind": "function", "cell": 2},
        profile={"name": None},
        versions={"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "equinox": None, "python": "3.11.7"},
        coverage=Coverage(),
        sources={"nb.ipynb": SHA},
        inputs=[Port("x", "args/0", "input")],
        outputs=[Port("y", "out", "output")],
        nodes=[
            Node(
                "a", "add", {"fill": float("-inf"), "shape": [2, "b"]}, ["x", "x"], ["t"], "M", "g", cell, [lib, cell]
            ),
            Node("b", "mul", {}, ["t", "t"], ["y"], "M", "g", cell, [cell]),
        ],
        values=[
            Value("x", [2, "b"], "float32"),
            Value("t", [2, "b"], "float32", producer="a"),
            Value("y", [2, "b"], "float32", producer="a"),  # not b: kept as written
        ],
        groups=[Group("g", "module", None, "M")],
    )


def sample_graphs() -> list[Graph]:
    return [
        small_graph(),
        chain_graph(50, group_every=7),
        doc_graph(),
        _with_values(small_graph()),
        measured_graph(),
        odd_graph(),
        synthetic(),
        realistic_graph(200),
    ]


def synthetic() -> Graph:
    """The robustness suite's chain (tests/robustness/test_load.py), with its versions filled in."""
    graph = synthetic_graph(300, per_group=40, path="model.py")
    graph.versions = {key: "0" for key in io.VERSION_KEYS}
    return graph


def realistic_graph(equations: int, layers: int = 12) -> Graph:
    """A transformer-shaped graph: per layer an attention and an MLP module, Flax frames under
    the workspace's (four deep), dot_generals with dimension numbers, broadcasts with shapes."""
    prims = ["dot_general", "add", "reshape", "transpose", "dot_general", "reduce_max", "sub", "exp", "reduce_sum"]
    prims += ["div", "dot_general", "add", "mul", "tanh", "broadcast_in_dim", "convert_element_type"]
    model = Frame("models/transformer.py", 120, 8, 120, 40, "Transformer.__call__")
    per_layer = max(1, equations // layers)
    groups = [Group("g0", "module", None, "Transformer")]
    values = [Value("v0", [8, 512, 1024], "float32")]
    nodes = []
    for i in range(equations):
        layer = min(i // per_layer, layers - 1)
        part = "attn" if (i % per_layer) < per_layer // 2 else "mlp"
        gid = f"g{1 + 2 * layer + (part == 'mlp')}"
        if len(groups) <= 1 + 2 * layer + (part == "mlp"):
            groups.append(Group(gid, "module", "g0", f"layers_{layer}/{part}"))
        prim = prims[i % len(prims)]
        params: dict[str, Any] = {}
        if prim == "dot_general":
            params = {
                "dimension_numbers": [[[2], [0]], [[], []]],
                "precision": None,
                "preferred_element_type": "float32",
            }
        elif prim == "broadcast_in_dim":
            params = {"shape": [8, 512, 1024 + i % 3], "broadcast_dimensions": [0, 1, 2], "sharding": None}
        elif prim.startswith("reduce"):
            params = {"axes": [2], "out_sharding": None}
        line = 30 + (i % 40)
        here = Frame("models/transformer.py", line, 12, line, 60, f"{part.upper()}.__call__")
        lib = Frame("flax/linen/linear.py", 250 + i % 7, 8, 250 + i % 7, 50, "Dense.__call__", package="flax")
        call = Frame("models/transformer.py", 90 + layer % 3, 8, 90 + layer % 3, 30, "Block.__call__")
        wrap = Frame("flax/linen/module.py", 700 + layer % 5, 4, 700 + layer % 5, 70, "wrapped_fn", package="flax")
        top = Frame("train.py", 12, 4, 12, 33, "loss_fn")
        stack = [here, wrap, call, wrap, model, top]
        if prim == "dot_general":
            stack = [lib, wrap, *stack]
        values.append(Value(f"v{i + 1}", [8, 512, 1024], "float32", producer=f"n{i}"))
        ins = [f"v{i}", f"v{max(0, i - 3)}"] if prim in ("add", "sub", "mul", "div", "dot_general") else [f"v{i}"]
        scope = f"Transformer/layers_{layer}/{part}"
        nodes.append(Node(f"n{i}", prim, params, ins, [f"v{i + 1}"], scope, gid, here, stack))
    return Graph(
        target={"path": "models/transformer.py", "name": "Transformer", "kind": "linen"},
        profile={"name": "default"},
        versions={"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "equinox": None, "python": "3.11.7"},
        coverage=Coverage(),
        sources={"models/transformer.py": SHA},
        inputs=[Port("v0", "args/0", "input")],
        outputs=[Port(f"v{equations}", "out", "output")],
        nodes=nodes,
        values=values,
        groups=groups,
    )


def round_trip(graph: Graph) -> None:
    expanded = io.to_json(graph)
    assert errors(EXPANDED, expanded) == []
    data = io.to_compact(graph)
    assert data["format"] == "jaxlsp.graph" and data["version"] == 2
    text = json.dumps(data)
    assert errors(COMPACT, json.loads(text)) == []
    assert io.from_json(json.loads(text)) == graph  # compact -> graph
    assert io.loads(io.dumps(graph, compact=True)) == graph
    packed = Packed(json.loads(text))
    streamed = "".join(packed.iter_json())
    assert streamed == io.dumps(graph)  # compact -> the expanded text, a row at a time
    assert compact.encode(json.loads(streamed)) == json.loads(text)  # expanded -> compact
    # Made from the model objects (the worker's path) or from their version 1 JSON: the same text,
    # member order and interning order included.
    assert json.dumps(compact.encode(expanded)) == text
    assert packed.to_graph() == graph
    # the compact text a kept trace streams (the viewer's GET /graph): valid, the same graph
    again = json.loads("".join(packed.iter_compact()))
    assert errors(COMPACT, again) == []
    assert io.from_json(again) == graph


@pytest.mark.parametrize("index", range(len(sample_graphs())))
def test_every_sample_graph_round_trips_through_the_compact_form(index: int) -> None:
    round_trip(sample_graphs()[index])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_round_trip_through_the_compact_form(graph: Graph) -> None:
    round_trip(graph)


def test_nodes_sharing_one_params_object_encode_as_nodes_with_equal_params() -> None:
    # The worker's builder gives the nodes of one equation one params object (an inlined jit's
    # body walked twice); the encoder makes its text once: the same file either way.
    graph = copy.deepcopy(sample_graphs()[0])
    dot = {"dimension_numbers": [[[1], [0]], [[], []]], "precision": None}
    graph.nodes[0].params = dot
    graph.nodes[1].params = dot
    graph.nodes[2].params = copy.deepcopy(dot)  # equal, not the same
    graph.nodes[3].params = {**dot, "precision": "HIGHEST"}
    round_trip(graph)
    data = io.to_compact(graph)
    rows = data["nodes"]["params"][:4]
    assert rows[0] == rows[1] == rows[2] != rows[3]


def test_version_1_files_and_the_earlier_transport_still_load(tmp_path: Path) -> None:
    graph = odd_graph()
    path = tmp_path / "old.json"
    path.write_text(json.dumps(io.to_json(graph)), encoding="utf-8")  # a file written before version 2
    assert io.read(path) == graph
    assert io.from_json(io.to_frame_table(graph)) == graph
    io.write(graph, path, compact=True)
    assert json.loads(path.read_text())["version"] == 2 and io.read(path) == graph


def test_the_compact_form_is_at_most_250_bytes_an_equation() -> None:
    graph = realistic_graph(10_000)
    expanded = len(io.dumps(graph).encode())
    size = len(io.dumps(graph, compact=True).encode())
    assert expanded / 10_000 > 1000  # as big as real models' files are in version 1 (~1,350)
    assert size / 10_000 <= 250, f"{size / 10_000:.0f} bytes per equation"


def _corrupt(where: str, value: Any) -> dict[str, Any]:
    data = io.to_compact(small_graph())
    at: Any = data
    keys = where.split(".")
    for key in keys[:-1]:
        at = at[key]
    last = keys[-1]
    if "[" in last:
        name, index = last[:-1].split("[")
        at[name][int(index)] = value
    else:
        at[last] = value
    return data


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("nodes.primitive[2]", 99, r"^nodes\.primitive\[2\]: expected an index from 0 to 15, got 99"),
        ("nodes.primitive[0]", "add", r"^nodes\.primitive\[0\]: expected an integer, got a string"),
        ("nodes.params", [0], r"^nodes\.params: expected 7 entries \(the count\), got 1"),
        ("nodes.frames[1]", 5, r"^nodes\.frames\[1\]: expected an index from 0 to 1, got 5"),
        ("nodes.group[0]", 7, r"^nodes\.group\[0\]: expected an index from -1 to 3, got 7"),
        ("nodes.refs[0]", 1000, r"^nodes\.refs\[0\]: refers to value 1000, not from 0 to 12"),
        ("nodes.refs", [], r"^nodes\.refs: expected 18 entries"),
        ("nodes.count", -1, r"^nodes\.count: expected an integer >= 0"),
        ("nodes.extra", [], r"^nodes\.extra: expected an object"),
        ("values.flags[0]", 9, r"^values\.flags\[0\]: expected an index from 0 to 5, got 9"),
        ("values.extra.literal", [[99, 1.0]], r"^values\.extra\.literal\[0\]: expected \[row \(0 to 12\), member\]"),
        ("tables.frames", [1, 2, 3], r"^tables\.frames: expected 8 integers per frame"),
        ("tables.frames[1]", 0, r"^tables\.frames\[0:8\]\.line: expected an integer >= 1, got 0"),
        ("tables.shapes", [[-1]], r"^tables\.shapes\[0\]\[0\]: expected an integer >= 0"),
        ("tables.strings", [1], r"^tables\.strings\[0\]: expected a string"),
        ("values.extra.literal", [[7, float("nan")]], r"^values\.extra\.literal\[0\]\[1\]: not a JSON value"),
    ],
)
def test_malformed_compact_input_names_the_column(where: str, value: Any, message: str) -> None:
    data = _corrupt(where, value)
    with pytest.raises(ValueError, match=message):
        io.from_json(data)


def test_a_row_the_version_1_rules_refuse_is_named_by_its_row() -> None:
    data = io.to_compact(small_graph())
    data["nodes"]["extra"]["costs"] = [[3, {"flops": -1}]]
    with pytest.raises(ValueError, match=r"^nodes\[3\]\.costs: missing key 'bytes'"):
        io.from_json(data)


def test_members_and_sections_the_columns_do_not_know_pass_through() -> None:
    """Later versions add optional members (a value's ``sharding``, a node's ``time``) and top-level
    sections (``mesh``): encoded and expanded unchanged, with no change here."""
    data = io.to_json(small_graph())
    data["nodes"][1]["time"] = {"seconds": 0.25}
    data["values"][4]["sharding"] = {"spec": ["x", None]}
    data["mesh"] = {"axes": {"x": 2}}
    packed = Packed(json.loads(json.dumps(compact.encode(data))))
    assert packed.node_json(1) == data["nodes"][1] and packed.value_json(4) == data["values"][4]
    assert json.loads("".join(packed.iter_json())) == data
    assert errors(COMPACT, compact.encode(data)) == []


# -- the store keeps the packed form --------------------------------------------------------------


def reference_level(graph: Graph, group: str | None) -> list[tuple[str, str]]:
    """One level as the store pages it, by brute force: the nodes in ``group`` and its child groups
    (each where its first node anywhere inside it is), in program order."""
    groups = {g.id: g for g in graph.groups}

    def inside(node: Node, gid: str) -> bool:
        at, seen = node.group, set()
        while at is not None and at in groups and at not in seen:
            if at == gid:
                return True
            seen.add(at)
            at = groups[at].parent
        return False

    placed: list[tuple[int, int, tuple[str, str]]] = []
    for i, n in enumerate(graph.nodes):
        if n.group == group and (group is None or group in groups):
            placed.append((i, 1, ("node", n.id)))
    for g in graph.groups:
        if g.parent == group:
            first = next((i for i, n in enumerate(graph.nodes) if inside(n, g.id)), None)
            if first is not None:
                placed.append((first, 0, ("group", g.id)))
    return [item for _, _, item in sorted(placed)]


def reference_nodes_at(graph: Graph, path: str, line: int, cell: int | None) -> list[str]:
    found = []
    for i, n in enumerate(graph.nodes):
        seen: set[str] = set()
        for depth, f in enumerate(n.frames):
            if f.package is None and f.path not in seen:
                seen.add(f.path)
                if f.path == path and f.cell == cell and f.line <= line <= f.end_line:
                    found.append((depth, i, n.id))
    return [nid for _, _, nid in sorted(found)]


def check_store(graph: Graph) -> None:
    store = GraphStore()
    trace = store.add(copy.deepcopy(graph), {})
    for group in [None, *(g.id for g in graph.groups)]:
        items = []
        cursor = None
        while True:
            page = store.page(trace.id, group, cursor, 3)
            items += page["items"]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert [(i["kind"], i["id"]) for i in items] == reference_level(graph, group)
        for item in items:
            if item["kind"] == "node":
                node = trace.node(item["id"])
                assert node is not None
                assert item["primitive"] == node.primitive and item["scope"] == node.scope
                assert [o["id"] for o in item["outputs"]] == node.outputs
    for n in graph.nodes:
        assert trace.node(n.id) == n
    for v in graph.values:
        assert trace.value(v.id) == v
    assert trace.node("n-1") is None and trace.value("nope") is None
    places = {(f.path, f.cell, line) for n in graph.nodes for f in n.frames for line in (f.line, f.end_line)}
    for path, cell, line in sorted(places, key=repr):
        assert [n.id for n in trace.nodes_at(path, line, cell)] == reference_nodes_at(graph, path, line, cell)
    assert trace.graph == graph
    assert trace.node_count == len(graph.nodes) and trace.value_count == len(graph.values)
    assert diff_packed(trace.packed, trace.packed).json() == diff(graph, graph).json()


@pytest.mark.parametrize("index", range(len(sample_graphs())))
def test_the_stores_lookups_answer_as_the_graph_does(index: int) -> None:
    check_store(sample_graphs()[index])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), graphs())
def test_the_stores_lookups_and_diff_on_random_graphs(graph: Graph, other: Graph) -> None:
    check_store(graph)
    graph, other = (io.from_json(io.to_json(g)) for g in (graph, other))  # params' keys as files have them
    assert diff_packed(Packed.from_graph(other), Packed.from_graph(graph)).json() == diff(other, graph).json()


def test_a_kept_trace_holds_no_model_objects_and_a_few_bytes_an_equation() -> None:
    """A 20,000-equation trace kept by the store: no Node or Value objects live on (a 60,000-op
    graph as objects took hundreds of MB of the server), and what it holds is small."""
    graph = realistic_graph(20_000)
    data = io.to_compact(graph)
    del graph
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        trace = Trace("t", data, {})
        trace.line_index()
        trace.level_entries(None)
        del data
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert sum(isinstance(o, (Node, Value)) for o in gc.get_objects()) == 0
    assert held / 20_000 <= 300, f"{held / 20_000:.0f} bytes per equation held"
    assert trace.node("n19999") is not None  # materialised on demand
