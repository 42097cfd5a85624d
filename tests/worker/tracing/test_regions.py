"""Higher-order primitives become groups owning their bodies; values, literals and constants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.worker.conftest import array, graph_of, request

pytest.importorskip("jax")

Run = Callable[[dict[str, Any]], dict[str, Any]]


def _members(graph: dict[str, Any], gid: str) -> list[dict[str, Any]]:
    return [n for n in graph["nodes"] if n["group"] == gid]


def test_control_flow_groups(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("funcs.py", "control", array(3))))
    kinds = [(g["kind"], g["label"]) for g in graph["groups"]]
    assert kinds == [
        ("cond", "cond (2 branches)"),
        ("cond_branch", "branch 0"),
        ("cond_branch", "branch 1"),
        ("while", "while"),
        ("while_cond", "cond"),
        ("while_body", "body"),
        ("scan", "scan (length 3)"),  # fori_loop with static bounds
        ("remat", "remat(<lambda>)"),
        ("scan", "scan (length 3)"),
    ]
    nodes = {n["id"]: n for n in graph["nodes"]}
    groups = {g["id"]: g for g in graph["groups"]}
    for group in graph["groups"]:
        owner = nodes[group["node"]]
        if group["kind"] in ("cond_branch", "while_cond", "while_body"):
            assert group["parent"] is not None
            assert _members(graph, group["id"]), group
        elif group["kind"] != "cond" and group["kind"] != "while":
            assert _members(graph, group["id"]), group
        # The owning equation sits inside its outermost region: a call and its body are one box.
        outermost = group
        while outermost["parent"] is not None and groups[outermost["parent"]]["node"] == owner["id"]:
            outermost = groups[outermost["parent"]]
        assert owner["group"] == outermost["id"], (owner, group)
    cond = next(n for n in graph["nodes"] if n["primitive"] == "cond")
    assert cond["params"]["branches"] == [{"group": "g1"}, {"group": "g2"}]
    # cond branches read the cond's operands directly
    branch0 = _members(graph, "g1")[0]
    assert branch0["inputs"][0] == cond["inputs"][1]
    remat = next(n for n in graph["nodes"] if n["primitive"] == "remat2")
    sin = next(n for n in graph["nodes"] if n["primitive"] == "sin")
    assert sin["inputs"] == remat["inputs"]
    assert "control-flow bodies (cond, while, scan) are traced, not executed" in graph["coverage"]["notes"]
    assert graph["coverage"]["complete"] is True


def test_custom_jvp_and_vjp(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("funcs.py", "customs", array(3))))
    assert [(g["kind"], g["label"]) for g in graph["groups"]] == [
        ("custom_jvp", "custom_jvp(softplus)"),
        ("custom_vjp", "custom_vjp(clip_grad)"),
    ]
    # the custom_jvp_call sits inside its own custom_jvp(softplus) box, not beside it
    assert {n["primitive"] for n in _members(graph, "g0")} == {"custom_jvp_call", "exp", "log1p"}
    jvp = next(n for n in graph["nodes"] if n["primitive"] == "custom_jvp_call")
    assert jvp["params"]["call_jaxpr"] == {"group": "g0"}
    assert graph["coverage"]["complete"] is True and graph["coverage"]["opaque"] == []


def test_jit_called_twice_has_distinct_ids(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("funcs.py", "twice", array(3), array(3))))
    jits = [n for n in graph["nodes"] if n["primitive"] == "jit"]
    assert len(jits) == 2
    groups = [g for g in graph["groups"] if g["kind"] == "jit"]
    assert [g["label"] for g in groups] == ["jit(double)", "jit(double)"]
    assert [g["node"] for g in groups] == [j["id"] for j in jits]
    muls = [n for n in graph["nodes"] if n["primitive"] == "mul"]
    assert len({m["id"] for m in muls}) == 2
    assert muls[0]["group"] != muls[1]["group"]
    assert muls[0]["outputs"] != muls[1]["outputs"]
    # jit bodies read the call's operands: the edges connect
    assert [m["inputs"][0] for m in muls] == [j["inputs"][0] for j in jits]
    ids = [v["id"] for v in graph["values"]]
    assert len(ids) == len(set(ids))


def test_literal_and_const_values(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("funcs.py", "with_consts", array(4))))
    values = {v["id"]: v for v in graph["values"]}
    consts = [v for v in graph["values"] if v["kind"] == "const"]
    assert [(c["shape"], c["dtype"], c["literal"]) for c in consts] == [([4], "float32", [0.0, 1.0, 2.0, 3.0])]
    assert [(p["label"], p["role"]) for p in graph["inputs"]] == [("const/0", "constant"), ("args/0", "input")]
    literals = [v for v in graph["values"] if v["kind"] == "literal"]
    assert [(v["shape"], v["literal"]) for v in literals] == [([], 3.0)]
    assert all(values[i]["producer"] is None for i in (consts[0]["id"], literals[0]["id"]))


def test_a_pallas_kernel_is_a_region_with_readable_params(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("kernels.py", "add", array(8, 128), array(8, 128))))
    call = next(n for n in graph["nodes"] if n["primitive"] == "pallas_call")
    body = [n["primitive"] for n in graph["nodes"] if n["group"] is not None]
    assert {"get", "add", "swap"} <= set(body)  # the kernel's ref reads, add and write
    treedefs = [p["tree"] for n in graph["nodes"] if isinstance(p := n["params"], dict) and "tree" in p]
    assert treedefs and all(set(t) == {"treedef"} and t["treedef"].startswith("PyTreeDef(") for t in treedefs)
    assert call["params"]["grid_mapping"]["index_map_tree"]["treedef"].startswith("PyTreeDef(")
    assert graph["coverage"]["complete"], graph["coverage"]["opaque"]  # structures are spelled out, not opaque
