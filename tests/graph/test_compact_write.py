"""The compact form (version 2) as written (jaxlsp.graph.compact_write): round trips with the
expanded one through both writers and both schemas, its size, members it does not know passed
through (docs/graph-format.md "Compact form")."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings

from jaxlsp.graph import io
from jaxlsp.graph.compact_write import encode
from jaxlsp.graph.model import Graph
from jaxlsp.graph.packed import Packed
from tests.graph.forms import COMPACT, EXPANDED, errors, graphs, realistic_graph, sample_graphs
from tests.graph.test_samples import small_graph


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
    assert encode(json.loads(streamed)) == json.loads(text)  # expanded -> compact
    # Made from the model objects (the worker's path) or from their version 1 JSON: the same text,
    # member order and interning order included.
    assert json.dumps(encode(expanded)) == text
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


def test_the_compact_form_is_at_most_250_bytes_an_equation() -> None:
    graph = realistic_graph(10_000)
    expanded = len(io.dumps(graph).encode())
    size = len(io.dumps(graph, compact=True).encode())
    assert expanded / 10_000 > 1000  # as big as real models' files are in version 1 (~1,350)
    assert size / 10_000 <= 250, f"{size / 10_000:.0f} bytes per equation"


def test_members_and_sections_the_columns_do_not_know_pass_through() -> None:
    """Later versions add optional members (a value's ``sharding``, a node's ``time``) and top-level
    sections (``mesh``): encoded and expanded unchanged, with no change here."""
    data = io.to_json(small_graph())
    data["nodes"][1]["time"] = {"seconds": 0.25}
    data["values"][4]["sharding"] = {"spec": ["x", None]}
    data["mesh"] = {"axes": {"x": 2}}
    packed = Packed(json.loads(json.dumps(encode(data))))
    assert packed.node_json(1) == data["nodes"][1] and packed.value_json(4) == data["values"][4]
    assert json.loads("".join(packed.iter_json())) == data
    assert errors(COMPACT, encode(data)) == []


# -- the store keeps the packed form --------------------------------------------------------------
