"""Values runs in the worker, in this process, on real JAX (CPU): statistics against numpy for every
target kind, the taken branch of a cond, a NaN in a scan's seventh iteration with its line,
custom_jvp / custom_vjp bodies, gradient norms per module against ``jax.grad``, the replay
validation (verified, partial, mismatch), and the limits (deadline, memory) naming the node.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlsp.graph.model import Graph
from jaxlsp.worker.core.failures import CaptureError, Workspace
from jaxlsp.worker.process import trace as main
from jaxlsp.worker.tracing import build
from jaxlsp.worker.values import interpret
from jaxlsp.worker.values import run as values_run
from tests.worker.conftest import array, request

VALUES = Path(__file__).resolve().parents[2] / "workspaces" / "values"
TARGETS = VALUES / "values_targets.py"

Run = Callable[..., tuple[Graph, dict[str, Any]]]


@pytest.fixture
def run_values() -> Iterator[Run]:
    """A values run of ``values_targets.py::NAME`` in this process, with every value's array returned
    inline (the graph's ids are known once it is built), stopped by ``budget`` or ``seconds`` after
    its start; ``sys.path``, the modules and the working directory are restored afterwards."""
    path, cwd, modules = list(sys.path), os.getcwd(), set(sys.modules)

    def run(
        name: str,
        *args: Any,
        budget: interpret.Budget | None = None,
        seconds: float | None = None,
        **profile: Any,
    ) -> tuple[Graph, dict[str, Any]]:
        req = request("values_targets.py", name, *args, workspace=VALUES, **profile)
        req["values"] = {}
        workspace = Workspace(str(VALUES))
        timings: dict[str, float] = {}
        found = main.trace_target(req, workspace, timings)
        assert found is not None
        graph, builder = main.build_graph(req, found, workspace, timings)
        req["values"] = {"inline": [v.id for v in graph.values]}
        extra: dict[str, Any] = {}
        if seconds is not None:  # from the run's start: tracing on a busy machine must not use it up
            budget = interpret.Budget(deadline=time.monotonic() + seconds)
        values_run.run(graph, builder, found.traced, req, found.device, time.monotonic(), extra, budget)
        return graph, extra.get("arrays", {})

    yield run
    sys.path[:] = path
    os.chdir(cwd)
    for name in set(sys.modules) - modules:
        if str(getattr(sys.modules.get(name), "__file__", "") or "").startswith(str(VALUES)):
            del sys.modules[name]


def as_array(inline: dict[str, Any]) -> np.ndarray:
    def finite(x: Any) -> Any:
        if isinstance(x, list):
            return [finite(i) for i in x]
        if isinstance(x, dict):
            return float(x["float"])
        return x

    return np.asarray(finite(inline["data"]), dtype=np.float64).reshape(inline["shape"])


def numpy_stats(a: np.ndarray) -> dict[str, Any]:
    flat = np.asarray(a, dtype=np.float64).reshape(-1)
    fin = flat[np.isfinite(flat)]
    out: dict[str, Any] = {
        "count": flat.size,
        "finite": fin.size,
        "nan": int(np.isnan(flat).sum()),
        "posInf": int((flat == np.inf).sum()),
        "negInf": int((flat == -np.inf).sum()),
        "zeros": float((flat == 0).sum() / flat.size) if flat.size else 0.0,
    }
    if fin.size:
        counts, edges = np.histogram(fin, 32)
        out.update(
            min=fin.min(),
            max=fin.max(),
            mean=fin.mean(),
            std=fin.std(),
            meanAbs=np.abs(fin).mean(),
            histogram={"lo": edges[0], "hi": edges[-1], "counts": counts.tolist()},
        )
    return out


def assert_like_numpy(graph: Graph, arrays: dict[str, Any]) -> int:
    """Every value with statistics and an inline array (not a loop body's) agrees with numpy."""
    checked = 0
    for value in graph.values:
        stats, inline = value.stats, arrays.get(value.id, {})
        if stats is None or "data" not in inline or "iterations" in stats:
            continue
        expected = numpy_stats(as_array(inline))
        for key in ("count", "finite", "nan", "posInf", "negInf"):
            assert stats[key] == expected[key], (value.id, key)
        assert stats["zeros"] == pytest.approx(expected["zeros"]), value.id
        if expected["finite"]:
            for key in ("min", "max", "mean", "std", "meanAbs"):
                assert stats[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), (value.id, key)
            hist = stats["histogram"]
            assert hist["lo"] == pytest.approx(expected["histogram"]["lo"], rel=1e-6, abs=1e-6)
            assert hist["hi"] == pytest.approx(expected["histogram"]["hi"], rel=1e-6, abs=1e-6)
            ours, theirs = np.array(hist["counts"]), np.array(expected["histogram"]["counts"])
            assert ours.sum() == theirs.sum() and np.abs(ours - theirs).max() <= 1, (value.id, ours, theirs)
        checked += 1
    return checked


def by_label(graph: Graph, arrays: dict[str, Any], label: str) -> np.ndarray:
    port = next(p for p in [*graph.inputs, *graph.outputs] if p.label == label)
    return as_array(arrays[port.value])


# --- statistics against numpy, every target kind -------------------------------------------------


def test_function_statistics_match_numpy_and_inputs_follow_their_generators(run_values: Run) -> None:
    w1 = array(3, 5)
    b1 = {**array(5), "generator": {"kind": "uniform", "seed": 1}}
    w2 = {**array(5, 4), "generator": {"kind": "normal", "seed": 2, "std": 0.5}}
    x = {**array(2, 3), "generator": {"kind": "arange", "start": -1.0, "step": 0.5}}
    graph, arrays = run_values("mlp", {"kind": "dict", "items": {"w1": w1, "b1": b1, "w2": w2}}, x)
    assert assert_like_numpy(graph, arrays) >= 8
    # The inputs are what the generators say, from the profile's seeds.
    key = jax.random.key
    np.testing.assert_allclose(by_label(graph, arrays, "args/0/w1"), jax.random.normal(key(0), (3, 5)), rtol=1e-6)
    np.testing.assert_allclose(by_label(graph, arrays, "args/0/b1"), jax.random.uniform(key(1), (5,)), rtol=1e-6)
    np.testing.assert_allclose(by_label(graph, arrays, "args/0/w2"), jax.random.normal(key(2), (5, 4)) * 0.5, rtol=1e-6)
    np.testing.assert_allclose(by_label(graph, arrays, "args/1"), np.arange(6.0).reshape(2, 3) * 0.5 - 1.0)
    assert graph.execution is not None and graph.execution["validation"]["status"] == "verified"
    assert "firstNonFinite" not in graph.execution


def test_linen_statistics_match_numpy_and_the_init_uses_the_seed(run_values: Run) -> None:
    from flax import linen as nn  # noqa: F401  (the target's kind)

    graph, arrays = run_values("LinenMLP", array(4, 3), seed=3)
    assert assert_like_numpy(graph, arrays) >= 8
    module = sys.modules["values_targets"]
    x = jax.random.normal(jax.random.key(3), (4, 3))
    variables = module.LinenMLP().init(jax.random.key(3), x)
    np.testing.assert_allclose(by_label(graph, arrays, "out"), module.LinenMLP().apply(variables, x), rtol=1e-5)
    assert graph.execution is not None and graph.execution["validation"]["status"] == "verified"


def test_nnx_statistics_match_numpy(run_values: Run) -> None:
    graph, arrays = run_values("NNXBlock", array(2, 4))
    assert assert_like_numpy(graph, arrays) >= 10
    assert graph.execution is not None and graph.execution["validation"]["status"] == "verified"


def test_equinox_statistics_match_numpy(run_values: Run) -> None:
    graph, arrays = run_values("EqxNet", array(3))
    assert assert_like_numpy(graph, arrays) >= 6
    assert graph.execution is not None and graph.execution["validation"]["status"] == "verified"


# --- control flow and custom rules ---------------------------------------------------------------


def test_only_the_taken_cond_branch_runs_and_is_marked_executed(run_values: Run) -> None:
    x = {**array(3), "generator": {"kind": "full", "value": 0.5}}  # sum > 0: branch 1 (exp)
    graph, arrays = run_values("branchy", x)
    groups = {g.id: g for g in graph.groups}
    branches = {g.label: g.id for g in graph.groups if g.kind == "cond_branch"}
    assert graph.execution is not None
    assert graph.execution["executed"].get(branches["branch 1"]) == 1
    assert branches["branch 0"] not in graph.execution["executed"]
    inside = {label: [n for n in graph.nodes if n.group == gid] for label, gid in branches.items()}
    values = {v.id: v for v in graph.values}
    assert [n.primitive for n in inside["branch 1"]] == ["exp"]
    assert all(values[o].stats is not None for n in inside["branch 1"] for o in n.outputs)
    assert all(values[o].stats is None for n in inside["branch 0"] for o in n.outputs)  # never ran
    np.testing.assert_allclose(by_label(graph, arrays, "out"), np.exp(np.full(3, 0.5)), rtol=1e-6)
    assert groups[branches["branch 1"]].kind == "cond_branch"
    assert values_run.RAN_NOTE in graph.coverage.notes and build.CONTROL_FLOW_NOTE not in graph.coverage.notes


def test_a_nan_in_the_seventh_iteration_of_a_scan_is_found_with_its_line(run_values: Run) -> None:
    graph, _ = run_values("blowup", {**array(4), "generator": {"kind": "full", "value": 6.0}})
    assert graph.execution is not None
    first = graph.execution["firstNonFinite"]
    line = next(i for i, text in enumerate(TARGETS.read_text().splitlines(), 1) if "jnp.sqrt(c)" in text)
    assert (
        first["message"]
        == f"first non-finite (nan): sqrt at values_targets.py:{line}, scan iteration 7, input min -1.0"
    )
    assert first["primitive"] == "sqrt" and first["kind"] == "nan" and first["source"]["line"] == line
    assert [i["index"] for i in first["iteration"]] == [7] and first["iteration"][0]["kind"] == "scan"
    (scan_body,) = [g.id for g in graph.groups if g.kind == "scan"]
    assert graph.execution["executed"][scan_body] == 9
    value = next(v for v in graph.values if v.id == first["value"])
    assert value.stats is not None
    assert value.stats["iterations"] == 9 and value.stats["firstNonFiniteIteration"] == [7]
    assert value.stats["nan"] == 3 * 4 and value.stats["finite"] == 6 * 4  # iterations 7, 8 and 9
    assert value.stats["max"] == pytest.approx(math.sqrt(5)) and value.stats["min"] == 0.0
    # The run still validates: the direct call makes the same NaNs.
    assert graph.execution["validation"]["status"] == "verified"


def test_custom_jvp_and_custom_vjp_bodies_are_evaluated(run_values: Run) -> None:
    graph, arrays = run_values("customs", array(5))
    assert graph.execution is not None
    kinds = {g.id: g.kind for g in graph.groups}
    ran = {kinds[g] for g in graph.execution["executed"]}
    assert {"custom_jvp", "custom_vjp"} <= ran
    inside = [n for n in graph.nodes if n.group is not None and kinds[n.group] in ("custom_jvp", "custom_vjp")]
    values = {v.id: v for v in graph.values}
    assert {"exp", "log1p", "tanh"} <= {n.primitive for n in inside}
    assert all(values[o].stats is not None for n in inside for o in n.outputs)
    assert assert_like_numpy(graph, arrays) >= 6
    x = by_label(graph, arrays, "args/0")
    np.testing.assert_allclose(by_label(graph, arrays, "out"), np.tanh(np.log1p(np.exp(x)) - 1.0) * 3.0, rtol=1e-5)
    assert graph.execution["validation"]["status"] == "verified"


def test_a_loop_value_that_never_changes_has_a_histogram_around_its_one_value(run_values: Run) -> None:
    # Every iteration sees the same range, a single point: the histogram is centred on it, as for
    # an array of one value outside a loop, not a range of width zero (a division by zero).
    graph, _ = run_values("steady", {**array(3), "generator": {"kind": "full", "value": 2.0}})
    (scan_body,) = [g.id for g in graph.groups if g.kind == "scan"]
    body = [n for n in graph.nodes if n.group == scan_body and n.primitive != "scan"]
    inside = [v for v in graph.values if any(v.id in n.outputs for n in body)]
    assert len(inside) == 3
    for value in inside:
        assert value.stats is not None and value.stats["iterations"] == 5
        hist = value.stats["histogram"]
        assert value.stats["min"] == value.stats["max"]
        assert hist["lo"] == value.stats["min"] - 0.5 and hist["hi"] == value.stats["max"] + 0.5
        assert sum(hist["counts"]) == value.stats["count"] == 5 * 3 and hist["counts"][16] == 5 * 3


@pytest.mark.parametrize("on_host", [True, False])
def test_a_loop_range_of_one_point_is_widened_like_a_single_value(
    on_host: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jaxlsp.worker.values import stats
    from jaxlsp.worker.values.stats import joined_range, summarize, summarize_batch

    monkeypatch.setattr(stats, "FETCH_BYTES", 0)  # off the host: the device's own way, as for a large array

    assert joined_range(1.0, 1.0, (1.0, 1.0)) == (0.5, 1.5)
    ones = jnp.ones(3)
    summaries = [summarize(ones, on_host=on_host, within=(1.0, 1.0))]
    if on_host:
        summaries += summarize_batch([np.ones(3, np.float32)], lambda i, lo, hi: joined_range(lo, hi, (1.0, 1.0)))
    for summary in summaries:
        assert summary is not None and (summary.hist_lo, summary.hist_hi) == (0.5, 1.5)
        assert summary.hist is not None and summary.hist[16] == 3 and sum(summary.hist) == 3


# --- gradients -----------------------------------------------------------------------------------


def test_gradient_norms_per_module_match_jax_grad(run_values: Run) -> None:
    graph, _ = run_values("LinenMLP", array(4, 3), transform="grad")
    assert graph.execution is not None
    gradients = graph.execution["gradients"]
    module = sys.modules["values_targets"]
    x = jax.random.normal(jax.random.key(0), (4, 3))
    params = module.LinenMLP().init(jax.random.key(0), x)["params"]
    grads = jax.grad(lambda p: module.LinenMLP().apply({"params": p}, x).sum())(params)
    norms = {
        name: float(jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree_util.tree_leaves(grads[name])))) for name in grads
    }
    total = float(jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree_util.tree_leaves(grads))))
    found = {m["module"]: m for m in gradients["modules"]}
    assert set(found) == {"", "Dense_0", "Dense_1"}
    for name, norm in norms.items():
        assert found[name]["norm"] == pytest.approx(norm, rel=1e-5) and found[name]["parameters"] == 2
    assert found[""]["norm"] == pytest.approx(total, rel=1e-5)
    per_param = {p["label"]: p["norm"] for p in gradients["parameters"]}
    assert per_param["params/Dense_1/kernel"] == pytest.approx(
        float(jnp.linalg.norm(grads["Dense_1"]["kernel"])), rel=1e-5
    )
    assert gradients["zero"] == []


def test_parameters_without_gradient_are_listed(run_values: Run) -> None:
    # tanh(x @ w1 + b1) @ w2 with relu on top: inputs of all-zero make every relu input 0
    zeros = {**array(2, 3), "generator": {"kind": "zeros"}}
    w = {
        "kind": "dict",
        "items": {"w1": array(3, 5), "b1": {**array(5), "generator": {"kind": "zeros"}}, "w2": array(5, 4)},
    }
    graph, _ = run_values("mlp", w, zeros, transform="grad")
    assert graph.execution is not None
    assert set(graph.execution["gradients"]["zero"]) == {"args/0/b1", "args/0/w1", "args/0/w2"}


# --- replay validation -----------------------------------------------------------------------------


def test_an_impure_target_is_a_mismatch_naming_the_first_diverging_output(run_values: Run) -> None:
    graph, _ = run_values("impure", array(3))
    assert graph.execution is not None
    validation = graph.execution["validation"]
    assert validation["status"] == "mismatch"
    mismatch = validation["mismatch"]
    assert mismatch["output"] == "out" and mismatch["elements"] == 3 and mismatch["node"] is not None
    assert "differs from a direct call" in mismatch["message"] and mismatch["maxRelError"] == pytest.approx(0.5)


def test_a_callback_makes_the_validation_partial(run_values: Run) -> None:
    graph, arrays = run_values("called_back", array(3))
    assert graph.execution is not None
    validation = graph.execution["validation"]
    (callback,) = [n.id for n in graph.nodes if n.primitive == "pure_callback"]
    assert validation["status"] == "partial"
    assert validation["partial"] == [{"node": callback, "reason": "pure_callback: a callback into Python"}]
    x = by_label(graph, arrays, "args/0")
    np.testing.assert_allclose(by_label(graph, arrays, "out"), x * 2.0 + 1.0, rtol=1e-6)


def test_a_scatter_add_combiner_leaves_the_validation_verified(run_values: Run) -> None:
    graph, arrays = run_values("scattered", array(3))
    assert any(g.kind == "scatter-add" for g in graph.groups)  # the combiner is in the graph
    assert graph.execution is not None and graph.execution["validation"]["status"] == "verified"
    x = by_label(graph, arrays, "args/0")
    np.testing.assert_allclose(by_label(graph, arrays, "out"), [x[0], 0.0, x[1] + x[2], 0.0, 0.0], rtol=1e-6)


# --- limits --------------------------------------------------------------------------------------


def test_a_run_past_its_deadline_stops_naming_the_node_it_reached(run_values: Run) -> None:
    with pytest.raises(CaptureError) as info:
        run_values("forever", array(2), seconds=0.5)
    error = info.value
    line = next(i for i, text in enumerate(TARGETS.read_text().splitlines(), 1) if "lax.while_loop" in text)
    assert error.kind == "timeout" and "the values run stopped at node n" in error.message
    assert f"values_targets.py:{line}" in error.message and error.frame is not None and error.frame["line"] == line


def test_a_run_that_would_pass_the_memory_cap_stops_before_the_allocation(run_values: Run) -> None:
    refuse = interpret.Budget(memory=lambda n: f"{n} bytes would pass the cap" if n > 1 << 20 else None)
    with pytest.raises(CaptureError) as info:
        run_values("huge", array(2), budget=refuse)
    error = info.value
    assert error.kind == "memory" and "4294967296 bytes would pass the cap" in error.message
    assert "the values run stopped at node n" in error.message and "values_targets.py:" in error.message


# --- the accelerator's way, checked on the CPU ------------------------------------------------------


def test_an_accelerators_small_values_come_to_the_host_in_one_transfer_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off the host, small arrays are fetched a batch at a time and summarised by numpy as the
    CPU's are: on a TPU each figure fetched alone and each shape's small reduction programs cost
    57 of a transformer's 65 s values run. The figures are the host's, to the bit."""
    from jaxlsp.worker.values.interpret import BATCH, Budget, Interpreter

    calls: list[int] = []
    real = jax.device_get

    def counted(x: Any) -> Any:
        calls.append(len(x) if isinstance(x, list) else 1)
        return real(x)

    monkeypatch.setattr(jax, "device_get", counted)
    arrays = [jax.random.normal(jax.random.key(i), (3, 1 + i % 5)) for i in range(2 * BATCH)]
    found = {}
    for on_host in (True, False):
        interp = Interpreter(on_host=on_host, budget=Budget())  # no deadline, no memory cap
        for i, a in enumerate(arrays):
            interp.observe(f"v{i}", a)
        interp.flush()
        found[on_host] = interp.stats()
    assert found[False] == found[True]
    assert calls == [BATCH, BATCH], calls  # two transfers of a batch each, no fetch per figure


@pytest.mark.parametrize(
    "make",
    [
        lambda: jax.random.normal(jax.random.key(1), (5, 7)),
        lambda: jnp.array([1.0, jnp.nan, -jnp.inf, 0.0, 2.5, jnp.inf, 0.0], jnp.float32),
        lambda: jnp.arange(-3, 9, dtype=jnp.int32),
        lambda: jnp.array([True, False, True, True]),
        lambda: (jax.random.normal(jax.random.key(2), (40,)) * 3).astype(jnp.bfloat16),
        lambda: jnp.array([3 + 4j, -1j, 0j], jnp.complex64),
        lambda: jnp.full((6,), 2.0),
        lambda: jnp.zeros((0, 3)),
    ],
)
def test_statistics_on_the_device_match_those_on_the_host(
    make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an accelerator an array over FETCH_BYTES is summarised by jax operations on the device
    (only scalars and the bin counts come back); run that way on the CPU, they agree with the numpy way."""
    from jaxlsp.worker.values import stats
    from jaxlsp.worker.values.stats import Accumulator, summarize

    monkeypatch.setattr(stats, "FETCH_BYTES", 0)

    x = make()
    found = []
    for on_host in (True, False):
        summary = summarize(x, on_host=on_host)
        assert summary is not None
        acc = Accumulator()
        acc.add(summary, None)
        found.append(acc.stats())
    host, device = found
    for key in ("count", "finite", "nan", "posInf", "negInf", "zeros"):
        assert host[key] == device[key], key
    for key in ("min", "max", "mean", "std", "meanAbs"):
        if host[key] is None:
            assert device[key] is None, key
        else:
            assert device[key] == pytest.approx(host[key], rel=1e-5, abs=1e-6), key
    if host["histogram"] is not None:
        assert device["histogram"]["counts"] == host["histogram"]["counts"]
        assert device["histogram"]["lo"] == pytest.approx(host["histogram"]["lo"])


@pytest.mark.parametrize(
    "values",
    [[3e38, 2e38, 3e38, 1e38], [3e38, -3e38, 3e38, 3e38], [np.inf, -np.inf, 1.0], [-3.4e38] * 7 + [0.5]],
)
def test_float32_sums_that_overflow_are_redone_in_float64_without_a_warning(values: list[float]) -> None:
    """A float32 sum past the largest float32 (an attention mask of ``finfo.min``) is expected and
    redone in float64: the figures are numpy's in float64, and numpy says nothing on stderr."""
    import warnings

    from jaxlsp.worker.values.stats import Accumulator, summarize

    a = np.array(values, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = summarize(a, on_host=True)
    assert summary is not None
    acc = Accumulator()
    acc.add(summary, None)
    stats, expected = acc.stats(), numpy_stats(a)
    for key in ("count", "finite", "nan", "posInf", "negInf"):
        assert stats[key] == expected[key], key
    for key in ("min", "max", "mean", "std", "meanAbs"):
        assert stats[key] == pytest.approx(expected[key], rel=1e-6), key
