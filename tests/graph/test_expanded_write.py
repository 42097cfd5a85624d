"""The expanded form (version 1) as written (jaxlsp.graph.expanded_write): the format's keys and
their order, non-finite floats spelled as objects, the earlier workers' pipe form's frame table."""

from __future__ import annotations

import json
import math

from jaxlsp.graph import io
from jaxlsp.graph.expanded_write import to_frame_table
from jaxlsp.graph.model import FRAME_TABLE, Frame
from tests.graph.forms import schema_errors
from tests.graph.test_samples import chain_graph, small_graph


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


def test_the_packed_transport_writes_each_frame_once() -> None:
    graph = chain_graph(50)
    shared = Frame("model.py", 3, 4, 3, 9, "f")
    for node in graph.nodes:
        node.source, node.frames = shared, [shared, Frame("lib.py", 1, 0, 1, 2)]
    packed = to_frame_table(graph)
    assert len(packed[FRAME_TABLE]) == 51  # one shared + one per node (distinct objects)
    back = io.from_json(packed)
    assert back == graph and back.nodes[0].source is back.nodes[1].source  # shared on read too
    assert len(json.dumps(packed)) < len(json.dumps(io.to_json(graph)))
