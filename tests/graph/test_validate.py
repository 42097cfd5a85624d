"""validate.check finds each kind of broken reference, and nothing in a sound graph; the schema is a
valid one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from jsonschema import Draft202012Validator

from jaxlsp.graph.model import Frame, Graph, Group, Node, Port, Value
from jaxlsp.graph.validate import MAX_PROBLEMS, check, load_schema
from tests.graph.test_samples import chain_graph, small_graph


def _dup_node(g: Graph) -> None:
    g.nodes.append(Node("n1", "add", {}, [], [], "", None, None))


def _cycle(g: Graph) -> None:
    g.groups[0].parent = "g3"  # g0 -> g3 -> g0


def _self_parent(g: Graph) -> None:
    g.groups[2].parent = "g2"


def _second_producer(g: Graph) -> None:
    g.nodes[1].outputs.append("v4")  # n0 already writes v4


BREAKS: list[tuple[str, Callable[[Graph], None], str]] = [
    ("duplicate node id", _dup_node, "node id n1 is used twice"),
    ("duplicate value id", lambda g: g.values.append(Value("v3", [], "float32")), "value id v3 is used twice"),
    ("duplicate group id", lambda g: g.groups.append(Group("g1", "module", None, "x")), "group id g1 is used twice"),
    ("missing input value", lambda g: g.nodes[1].inputs.append("v99"), "node n1 (add) reads missing value v99"),
    ("missing output value", lambda g: g.nodes[1].outputs.append("v98"), "node n1 (add) writes missing value v98"),
    ("missing producer", lambda g: setattr(g.values[4], "producer", "n42"), "value v4 names missing producer n42"),
    (
        "producer does not list it",
        lambda g: setattr(g.values[0], "producer", "n1"),
        "value v0 names producer n1, which does not list it as an output",
    ),
    (
        "output names another producer",
        lambda g: setattr(g.values[5], "producer", None),
        "value v5 is an output of node n1 but names producer None",
    ),
    ("two producers", _second_producer, "value v4 is an output of both n0 and n1"),
    (
        "literal with producer",
        lambda g: setattr(g.values[8], "kind", "literal"),
        "literal value v8 names producer n3",
    ),
    ("unknown value kind", lambda g: setattr(g.values[0], "kind", "thing"), "value v0 has unknown kind 'thing'"),
    (
        "missing input port value",
        lambda g: g.inputs.append(Port("v77", "args/9", "input")),
        "graph input 'args/9' refers to missing value v77",
    ),
    (
        "missing output port value",
        lambda g: setattr(g.outputs[0], "value", "v76"),
        "graph output 'out/0' refers to missing value v76",
    ),
    (
        "bad input role",
        lambda g: setattr(g.inputs[0], "role", "output"),
        "graph input 'params/Dense_0/kernel' has unknown role",
    ),
    ("bad output role", lambda g: setattr(g.outputs[0], "role", "parameter"), "graph output 'out/0' has unknown role"),
    ("missing node group", lambda g: setattr(g.nodes[0], "group", "g9"), "node n0 is in missing group g9"),
    ("missing parent group", lambda g: setattr(g.groups[1], "parent", "g8"), "group g1 has missing parent g8"),
    ("missing owner node", lambda g: setattr(g.groups[2], "node", "n55"), "group g2 is owned by missing node n55"),
    ("parent cycle", _cycle, "groups g0 -> g3 -> g0 form a cycle"),
    ("self parent", _self_parent, "groups g2 -> g2 form a cycle"),
    (
        "opaque node missing",
        lambda g: setattr(g.coverage, "opaque", [{"node": "n66", "reason": "x"}]),
        "coverage lists missing node n66 as opaque",
    ),
    (
        "complete but opaque",
        lambda g: setattr(g.coverage, "opaque", [{"node": "n2", "reason": "callback"}]),
        "coverage is complete although opaque regions are listed",
    ),
    (
        "backwards source range",
        lambda g: setattr(g.nodes[4], "source", Frame("model.py", 7, 11, 6, 18)),
        "node n4 source model.py: lines 7..6 are not an ordered 1-based range",
    ),
    (
        "backwards frame columns",
        lambda g: g.nodes[0].frames.append(Frame("x.py", 3, 9, 3, 2)),
        "node n0 frames x.py: end column 2 before column 9",
    ),
]


@pytest.mark.parametrize(("what", "brk", "problem"), BREAKS, ids=[b[0] for b in BREAKS])
def test_check_names_each_broken_reference(what: str, brk: Callable[[Graph], None], problem: str) -> None:
    graph = small_graph()
    brk(graph)
    problems = check(graph)
    assert any(p.startswith(problem) for p in problems), problems


def test_problems_are_capped() -> None:
    # check's speed is benchmarks/scale.py's (the server checks each result before keeping it).
    graph = chain_graph(20_000, group_every=10)
    assert check(graph) == []
    for node in graph.nodes:
        node.group = "nowhere"
    assert len(check(graph)) == MAX_PROBLEMS


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(load_schema())
