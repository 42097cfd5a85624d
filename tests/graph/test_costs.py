"""Roll-ups of per-equation costs on a hand-made graph: call bodies, loops, runs, modules, the
table, and the optional ``costs`` fields in the file (issue 18)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from jaxlsp.graph import costs, io
from jaxlsp.graph.costs import Figures
from jaxlsp.graph.model import Graph
from jaxlsp.graph.validate import load_schema
from tests.graph.test_samples import small_graph

VALIDATOR = Draft202012Validator(load_schema())


def measured_graph() -> Graph:
    """``small_graph`` with figures for its five measured equations: n0 dot 10, n1 add 2, n3 max 1
    (in jit g2), n4 mul 3, n6 tanh 5 (in the length-12 scan g3)."""
    graph = small_graph()
    leaf: dict[int, Figures | str] = {
        0: Figures(10, 100, 0),
        1: Figures(2, 20, 0),
        3: Figures(1, 10, 0),
        4: Figures(3, 30, 0),
        6: Figures(0, 40, 5),
    }
    costs.annotate(graph, leaf, {"platform": "cpu", "equations": 7})
    return graph


def test_measured_nodes_are_the_equations_not_rolled_up() -> None:
    graph = small_graph()
    assert costs.measured(graph) == [0, 1, 3, 4, 6]


def test_call_and_loop_nodes_roll_up_their_bodies() -> None:
    graph = measured_graph()
    by_id = {n.id: n.costs for n in graph.nodes}
    assert by_id["n2"] == {"flops": 1, "bytes": 10, "transcendentals": 0, "runs": 1}  # jit: its body
    assert by_id["n5"] == {
        "flops": 0,
        "bytes": 12 * 40,
        "transcendentals": 12 * 5,
        "runs": 1,
        "trips": 12,
        "tripsStatic": True,
    }
    assert by_id["n6"] is not None and by_id["n6"]["runs"] == 12
    assert by_id["n3"] is not None and by_id["n3"]["runs"] == 1
    assert costs.total(graph) == Figures(16, 160 + 480, 60)
    assert costs.body_once(graph) == Figures(16, 200, 5)
    assert graph.costs == {"platform": "cpu", "equations": 7}


def test_group_totals_include_everything_inside() -> None:
    totals = costs.group_totals(measured_graph())
    assert totals["g1"] == Figures(12, 120, 0)  # Dense_0
    assert totals["g3"] == Figures(0, 480, 60)  # the scan body, 12 times
    assert totals["g0"] == Figures(15, 630, 60)  # Model: Dense_0, its mul and the scan
    assert totals["g2"] == Figures(1, 10, 0)


def test_the_module_table_counts_submodules_and_parameters() -> None:
    table = costs.table(measured_graph())
    rows = {r.scope: r for r in table.rows}
    assert [r.scope for r in table.rows] == ["Model", "Model/Dense_0", ""]  # by FLOPs
    assert rows["Model"].figures == Figures(15, 630, 60)
    assert rows["Model/Dense_0"].figures == Figures(12, 120, 0)
    assert rows[""].figures == Figures(1, 10, 0)  # only what lies outside every module
    # the kernel (3x4) and bias (4) are used in Dense_0 only; the b-sized input is no parameter
    assert (rows["Model/Dense_0"].params, rows["Model/Dense_0"].param_bytes) == (16, 64)
    assert rows["Model"].params == 16
    assert not table.gradient and table.measured


def test_the_table_text_has_the_issue_columns() -> None:
    text = costs.render_table(costs.table(measured_graph()))
    lines = text.splitlines()
    assert lines[0].split() == ["module", "params", "FLOPs", "bytes", "share"]
    assert lines[1].split() == ["Model", "16", "15", "630", "93.8%"]
    assert lines[3].split() == ["(outside", "modules)", "0", "1", "10", "6.2%"]
    assert lines[4].startswith("total: 16 FLOPs")


def test_cond_counts_the_most_expensive_branch_and_an_empty_one_costs_nothing() -> None:
    from jaxlsp.graph.model import Group, Node, Value

    graph = small_graph()
    graph.nodes.append(Node("n7", "cond", {}, ["v5", "v5"], ["v13"], "", None, None))
    graph.nodes.append(Node("n8", "sin", {}, ["v5"], ["v14"], "", "g5", None))
    graph.values += [Value("v13", [4], "float32", producer="n7"), Value("v14", [4], "float32", producer="n8")]
    graph.groups += [
        Group("g4", "cond", None, "cond (2 branches)", "n7"),
        Group("g5", "cond_branch", "g4", "branch 0", "n7"),
        Group("g6", "cond_branch", "g4", "branch 1", "n7"),  # identity: no equation
    ]
    leaf: dict[int, Figures | str] = {i: Figures(1, 1, 0) for i in (0, 1, 3, 4, 6)}
    leaf[8] = "XLA could not analyse it alone"
    costs.annotate(graph, leaf, {"platform": "cpu"})
    cond, sin = graph.nodes[7].costs, graph.nodes[8].costs
    assert cond is not None and sin is not None
    assert cond["branch"] == 0 and sin["runs"] == 1  # 0 FLOPs either way: the first branch wins ties
    assert sin["unknown"] == "XLA could not analyse it alone" and sin["flops"] == 0
    assert costs.table(graph).unknown == 1


def test_costs_round_trip_and_validate() -> None:
    graph = measured_graph()
    data = io.to_json(graph)
    assert [e.message for e in VALIDATOR.iter_errors(data)] == []
    assert data["nodes"][5]["costs"]["trips"] == 12
    assert list(data)[-1] == "costs"
    assert io.from_json(data) == graph
    plain = io.to_json(small_graph())
    assert "costs" not in plain and all("costs" not in n for n in plain["nodes"])  # old graphs: no key


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["nodes"][0]["costs"].update(flops=-1), "nodes[0].costs.flops: expected an integer >= 0"),
        (lambda d: d["nodes"][0]["costs"].update(flops=1.5), "nodes[0].costs.flops: expected an integer"),
        (lambda d: d["nodes"][0]["costs"].pop("runs"), "nodes[0].costs: missing key 'runs'"),
        (lambda d: d["nodes"][0]["costs"].update(cycles=3), "nodes[0].costs.cycles: unknown key"),
        (lambda d: d["costs"].pop("platform"), "costs: missing key 'platform'"),
        (lambda d: d["costs"].update(speed=1), "costs.speed: unknown key"),
    ],
)
def test_bad_costs_are_named_by_key_path(edit: Any, message: str) -> None:
    data = copy.deepcopy(io.to_json(measured_graph()))
    edit(data)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        io.from_json(data)
