"""XLA's costs per equation, measured in the worker on real captures (issue 18): hand formulas for
products and elementwise ops, loops multiplied, cond's most expensive branch, the disk cache,
backward equations attributed to their forward modules, residuals as JAX reports them."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.graph import costs, io, memory
from tests.worker.conftest import array, graph_of, request

pytest.importorskip("jax")

COSTS = Path(__file__).resolve().parents[2] / "workspaces" / "costs"
Run = Callable[..., dict[str, Any]]


@pytest.fixture
def trace(run_capture: Callable[[dict[str, Any]], dict[str, Any]], tmp_path: Path) -> Iterator[Run]:
    """``trace(file, name, *inputs, cache=..., **profile)``: a capture of the costs workspace with
    costs measured (cached in ``cache``, a fresh folder by default); the graph's JSON back."""

    def run(file: str, name: str, *args: Any, cache: Path | None = None, xla: bool = False, **profile: Any) -> Any:
        req = request(file, name, *args, workspace=COSTS, **profile)
        req["costs"] = {"cacheDir": str(cache or tmp_path / "costs-cache"), "xlaCompare": xla}
        return graph_of(run_capture(req))

    yield run
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(COSTS)):
            del sys.modules[name]


def _node(graph: dict[str, Any], primitive: str) -> dict[str, Any]:
    return next(n for n in graph["nodes"] if n["primitive"] == primitive)


def test_dot_general_flops_are_two_m_n_k(trace: Run) -> None:
    graph = trace("cost_fns.py", "matmul", array(4, 6), array(6, 5))
    dot = _node(graph, "dot_general")
    # 4x6 @ 6x5: 4*5 outputs, each 6 multiplies and 6 adds
    assert dot["costs"]["flops"] == 2 * 4 * 5 * 6
    # reads 4*6 + 6*5 floats, writes 4*5
    assert dot["costs"]["bytes"] == 4 * (4 * 6 + 6 * 5 + 4 * 5)
    assert dot["costs"]["runs"] == 1
    assert graph["costs"]["platform"] == "cpu" and graph["costs"]["unique"] == 1


def test_conv_flops_are_two_per_kernel_tap_per_output(trace: Run) -> None:
    graph = trace("cost_fns.py", "conv", array(1, 8, 8, 3), array(3, 3, 3, 2))
    conv = _node(graph, "conv_general_dilated")
    outputs = 1 * 6 * 6 * 2  # VALID 3x3 on 8x8: 6x6, 2 features
    assert conv["costs"]["flops"] == 2 * outputs * (3 * 3 * 3)


def test_elementwise_flops_and_transcendentals(trace: Run) -> None:
    graph = trace("cost_fns.py", "elementwise", array(4, 6), array(4, 6))
    add, tanh, mul = (_node(graph, p)["costs"] for p in ("add", "tanh", "mul"))
    assert add["flops"] == mul["flops"] == 24  # one per element
    assert tanh["flops"] == 0 and tanh["transcendentals"] == 24
    assert add["bytes"] == 4 * 24 * 3  # two operands read, one result written


def test_scan_bodies_are_multiplied_by_the_length(trace: Run) -> None:
    graph = trace("cost_fns.py", "scanned", array(4, 6), array(6, 6))
    scan, dot, tanh = (_node(graph, p) for p in ("scan", "dot_general", "tanh"))
    assert dot["costs"]["runs"] == 7 and tanh["costs"]["runs"] == 7
    assert scan["costs"]["trips"] == 7 and scan["costs"]["tripsStatic"] is True
    assert scan["costs"]["flops"] == 7 * (2 * 4 * 6 * 6)
    assert scan["costs"]["transcendentals"] == 7 * 24
    g = io.from_json(graph)
    assert costs.total(g).flops == 7 * 2 * 4 * 6 * 6
    assert costs.body_once(g).flops == 2 * 4 * 6 * 6


def test_counted_while_loops_are_multiplied_and_others_marked(trace: Run) -> None:
    counted = trace("cost_fns.py", "counted_while", array(4, 6), array(6, 6))
    loop = _node(counted, "while")["costs"]
    assert loop["trips"] == 5 and loop["tripsStatic"] is True
    assert _node(counted, "dot_general")["costs"]["runs"] == 5
    assert _node(counted, "lt")["costs"]["runs"] == 6  # the condition runs once more
    free = trace("cost_fns.py", "data_while", array(4, 6), array(6, 6))
    loop = _node(free, "while")["costs"]
    assert loop["tripsStatic"] is False and loop["trips"] == 1
    assert _node(free, "dot_general")["costs"]["runs"] == 1
    assert any("no static trip count" in n for n in costs.table(io.from_json(free)).notes)


def test_cond_counts_its_most_expensive_branch(trace: Run) -> None:
    graph = trace("cost_fns.py", "branches", array(4, 6), array(6, 6))
    cond = _node(graph, "cond")["costs"]
    assert cond["branch"] == 1  # lax.cond's operands: branch 1 is the true one, two products
    assert cond["flops"] == 2 * (2 * 4 * 6 * 6)
    assert _node(graph, "add")["costs"]["runs"] == 0  # the cheap branch is not counted


def test_the_disk_cache_measures_each_equation_once(trace: Run, tmp_path: Path) -> None:
    cache = tmp_path / "shared"
    first = trace("cost_fns.py", "elementwise", array(4, 6), array(4, 6), cache=cache)
    assert first["costs"]["lowered"] == 3 and first["costs"]["cached"] == 0
    again = trace("cost_fns.py", "elementwise", array(4, 6), array(4, 6), cache=cache)
    assert again["costs"]["lowered"] == 0 and again["costs"]["cached"] == 3
    assert [n["costs"] for n in again["nodes"]] == [n["costs"] for n in first["nodes"]]
    wider = trace("cost_fns.py", "elementwise", array(4, 8), array(4, 8), cache=cache)
    assert wider["costs"]["lowered"] == 3  # new input types: new equations
    assert list(cache.glob("xla-*.json"))


def test_xla_compare_agrees_with_the_body_once_total(trace: Run) -> None:
    graph = trace("cost_fns.py", "scanned", array(4, 6), array(6, 6), xla=True)
    xla = graph["costs"]["xla"]
    once = costs.body_once(io.from_json(graph))
    assert abs(once.flops - xla["flops"]) <= 0.1 * xla["flops"]
    assert xla["memory"]["argument"] == 4 * (4 * 6 + 6 * 6)


def test_backward_nodes_carry_the_forward_module_they_differentiate(trace: Run) -> None:
    graph = io.from_json(trace("cost_models.py", "MLP", array(2, 3), kind="linen", transform="grad"))
    backward = [n for n in graph.nodes if costs.is_backward(n)]
    forward = [n for n in graph.nodes if not costs.is_backward(n)]
    assert backward and forward
    scopes = {n.scope for n in backward}
    # the two layers, the MLP's own ops (its relu), the loss (the sum, outside every module)
    assert scopes <= {"MLP/Dense_0", "MLP/Dense_1", "MLP", ""}
    assert {"MLP/Dense_0", "MLP/Dense_1", "MLP", ""} <= scopes
    by_scope = {s: [n.primitive for n in backward if n.scope == s] for s in scopes}
    assert "dot_general" in by_scope["MLP/Dense_0"] and "dot_general" in by_scope["MLP/Dense_1"]
    relu_forward = {n.primitive for n in forward if n.scope == "MLP"}
    assert relu_forward and set(by_scope["MLP"])  # the relu and its derivative, both in MLP
    rows = {r.scope: r for r in costs.table(graph).rows}
    for layer in ("MLP/Dense_0", "MLP/Dense_1"):
        assert rows[layer].forward.flops > 0 and rows[layer].backward.flops > 0
    # the input layer's backward: only the weight gradient (2*3*8*2); the second also passes the
    # gradient back to the hidden layer: twice its forward product
    assert rows["MLP/Dense_1"].backward.flops >= 2 * rows["MLP/Dense_1"].forward.flops - 64


def _jax_residuals(capsys: pytest.CaptureFixture[str], remat: bool, policy: str | None) -> list[str]:
    """``print_saved_residuals`` of the same gradient, as (shape) strings."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import print_saved_residuals

    sys.path.insert(0, str(COSTS))
    try:
        import cost_models
    finally:
        sys.path.remove(str(COSTS))
    model = cost_models.Stack(remat=remat, policy=policy)
    x = jnp.ones((2, 8))
    variables = jax.eval_shape(lambda: model.init(jax.random.key(0), x))
    capsys.readouterr()
    # as the graph's gradient: with respect to the parameters only (x is a constant here)
    print_saved_residuals(lambda v: jnp.sum(model.apply(v, x)), variables)
    printed = capsys.readouterr().out
    del sys.modules["cost_models"]
    return sorted(re.findall(r"^(\S+\[[\d,]*\])", printed, re.M))


@pytest.mark.parametrize(("remat", "policy"), [(False, None), (True, None), (True, "dots_saveable")])
def test_residuals_match_jax_and_follow_the_remat_policy(
    trace: Run, capsys: pytest.CaptureFixture[str], remat: bool, policy: str | None
) -> None:
    init = {"kwargs": {"remat": {"kind": "static", "value": remat}}}
    if policy:
        init["kwargs"]["policy"] = {"kind": "static", "value": policy}
    graph = io.from_json(trace("cost_models.py", "Stack", array(2, 8), kind="linen", transform="grad", init=init))
    res = memory.residuals(graph)
    assert res is not None
    values = {v.id: v for v in graph.values}
    from jaxlsp.graph.report import shape_str

    ours = sorted(shape_str(values[v]) for v in res.values)
    theirs = _jax_residuals(capsys, remat, policy)
    assert ours == theirs
    activations = [s for s, _, _ in res.by_module if s != memory.INPUTS]
    if not remat:
        assert res.recomputed_ops == 0
        assert len(activations) == 3  # each block keeps its tanh's derivative
    else:
        assert res.recomputed_ops > 0 and res.recomputed_flops is not None and res.recomputed_flops > 0


def test_a_remat_policy_changes_the_residuals(trace: Run) -> None:
    sizes = {}
    for remat, policy in [(False, None), (True, "dots_saveable"), (True, None)]:
        init: dict[str, Any] = {"kwargs": {"remat": {"kind": "static", "value": remat}}}
        if policy:
            init["kwargs"]["policy"] = {"kind": "static", "value": policy}
        graph = io.from_json(trace("cost_models.py", "Stack", array(64, 8), kind="linen", transform="grad", init=init))
        res = memory.residuals(graph)
        assert res is not None
        sizes[(remat, policy)] = res.bytes - res.input_bytes  # activations: what a policy decides
    # no checkpoint keeps each block's tanh and its derivative (6 x f32[64,16]); saving the dots
    # keeps the products and what enters each block (as many here); saving nothing keeps only
    # what enters each block
    assert sizes[(False, None)] == 6 * 64 * 16 * 4
    assert sizes[(False, None)] >= sizes[(True, "dots_saveable")] > sizes[(True, None)] > 0


def test_liveness_peak_of_a_chain_by_hand(trace: Run) -> None:
    graph = io.from_json(trace("cost_fns.py", "chain", array(1000)))
    assert [n.primitive for n in graph.nodes] == ["mul", "add", "sin", "mul"]
    a, b, c, out = (n.outputs[0] for n in graph.nodes)
    x = graph.inputs[0].value
    peak = memory.peak(graph)
    # x (held by the caller) + a + b while the add runs: a dies there, then b + c, then c + out,
    # each 4,000 bytes; the first of the three equal peaks is reported
    assert peak.bytes == 3 * 4000
    assert peak.node == graph.nodes[1].id
    assert sorted(peak.live) == sorted([x, a, b])
    assert dict(peak.by_module) == {memory.INPUTS: 4000, "": 8000}
    assert peak.inputs == 4000
    assert c and out


def test_precision_counts_conversions_and_products(trace: Run) -> None:
    from jaxlsp.graph.precision import precision

    rows = precision(io.from_json(trace("cost_fns.py", "mixed", array(4, 6), array(6, 6))))
    assert len(rows) == 1 and rows[0].scope == ""
    assert dict(rows[0].conversions) == {"f32->bf16": 2, "bf16->f32": 1}
    assert dict(rows[0].products) == {
        "bf16 x bf16 -> bf16, precision DEFAULT": 1,
        "f32 x f32 -> f32, precision HIGHEST": 1,
    }
