"""The graph diff on hand-made graphs: matching by scope, primitive and order; what is ignored."""

from __future__ import annotations

import copy
from dataclasses import replace

from jaxlsp.graph.diff import diff, render_diff
from jaxlsp.graph.model import Frame, Node, Value
from tests.graph.test_samples import chain_graph, small_graph


def test_a_graph_is_the_same_as_itself_whatever_its_positions_ids_and_costs() -> None:
    before = small_graph()
    after = copy.deepcopy(before)
    for n in after.nodes:
        n.source = Frame("model.py", 40, 0, 40, 9) if n.source else None
        n.frames = [Frame("elsewhere.py", 1, 0, 1, 1)]
        n.costs = {"flops": 1, "bytes": 1, "transcendentals": 0, "runs": 1}
    after.nodes[2].params = {**after.nodes[2].params, "jaxpr": {"group": "g9"}}
    before.nodes[2].params = {**before.nodes[2].params, "jaxpr": {"group": "g2"}}
    found = diff(before, after)
    assert found.same and found.summary() == "no changes" and found.matched == len(before.nodes)
    assert render_diff(found) == "no changes"


def test_a_node_inserted_in_the_middle_of_a_scope_is_one_addition() -> None:
    before = chain_graph(10, group_every=5)
    after = copy.deepcopy(before)
    extra = Node("n99", "cos", {}, ["v2"], ["v99"], "Block_0", "g0", None)
    after.nodes.insert(2, extra)
    after.values.append(Value("v99", [4, 128], "float32", producer="n99"))
    found = diff(before, after)
    assert [n.id for n in found.added] == ["n99"] and not found.removed and not found.changed
    assert found.summary() == "+1 op; new Block_0 cos"


def test_changes_name_types_and_params() -> None:
    before = small_graph()
    after = copy.deepcopy(before)
    after.values[4] = replace(after.values[4], shape=["b", 8])  # v4: the dot's output
    after.nodes[5].params = {"length": 24, "reverse": False}  # the scan
    found = diff(before, after)
    texts = [c.describe() for c in found.changed]
    assert texts[0] == "Model/Dense_0 dot_general f32[b,4] \u2192 f32[b,8]"
    assert "Model scan length 12 \u2192 24" in texts
    add = next(c for c in found.changed if c.after.primitive == "add")
    assert add.fields == [("inputs", "f32[b,4], f32[4]", "f32[b,8], f32[4]")]
    assert found.summary() == f"{len(found.changed)} changed; Model/Dense_0 dot_general f32[b,4] \u2192 f32[b,8]"


def test_removed_scopes_and_ports() -> None:
    before = small_graph()
    after = copy.deepcopy(before)
    after.nodes = [n for n in after.nodes if n.scope != "Model/Dense_0"]
    after.inputs = after.inputs[1:]
    found = diff(before, after)
    assert [n.id for n in found.removed] == ["n0", "n1"]
    assert [(p.label, p.before, p.after) for p in found.inputs] == [("params/Dense_0/kernel", "f32[3,4]", None)]
    assert found.summary() == "-2 ops"
    data = found.json()
    assert data["counts"] == {"added": 0, "removed": 2, "changed": 0, "matched": 5}
    assert data["inputs"] == [{"label": "params/Dense_0/kernel", "before": "f32[3,4]", "after": None}]


def test_a_different_activation_replaces_its_operations() -> None:
    before = chain_graph(6)
    after = copy.deepcopy(before)
    # a gelu's mul, tanh and add in the middle become one max; the chain keeps its types
    for n, prim in zip(before.nodes[2:5], ["mul", "tanh", "add"], strict=True):
        n.primitive = prim
    after.nodes[2].primitive = "max"
    del after.nodes[3:5]
    after.nodes[3].inputs = ["v3"]
    found = diff(before, after)
    assert [n.primitive for n in found.removed] == ["mul", "tanh", "add"]
    assert [n.primitive for n in found.added] == ["max"]
    assert found.changed == [] and found.matched == 3
    assert found.summary() == "+1 op, -3 ops; new max"
