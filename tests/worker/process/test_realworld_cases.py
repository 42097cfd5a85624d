"""Patterns found tracing real Flax, Equinox and JAX examples, reproduced by small fixtures.

Each test names the pattern it guards: ``functools.partial`` model presets, functions that return
modules, Linen boxed (partitioned) parameters, keys made inside the program, NNX in-place state
updates, and ``load = "definitions"`` on scripts with failing optional imports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, graph_of, static
from tests.worker.conftest import request as base_request

pytest.importorskip("jax")

Run = Callable[[dict[str, Any]], dict[str, Any]]

REAL = Path(__file__).resolve().parents[2] / "workspaces" / "capture_real"


def request(file: str, name: str, *args: Any, kwargs: dict[str, Any] | None = None, **profile: Any) -> dict[str, Any]:
    return base_request(file, name, *args, kwargs=kwargs, workspace=REAL, **profile)


def _checked(result: dict[str, Any]) -> dict[str, Any]:
    from jaxlsp.graph import io, validate

    graph = graph_of(result)
    assert validate.check(io.from_json(graph)) == []
    return graph


def _inputs(graph: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["label"], p["role"]) for p in graph["inputs"]]


def _outputs(graph: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["label"], p["role"]) for p in graph["outputs"]]


def _shape(graph: dict[str, Any], port: dict[str, Any]) -> list[Any]:
    return next(v["shape"] for v in graph["values"] if v["id"] == port["value"])


def test_linen_partial_preset_is_built_with_init_kwargs(run_capture: Run) -> None:
    # ResNet18 = partial(ResNet, stage_sizes=..., block_cls=...): kind inferred through the partial
    req = request(
        "real_models.py",
        "TinerTower",
        array(2, 3),
        kwargs={"train": static(True)},
        init={"args": [], "kwargs": {}},
        mutable=["batch_stats"],
    )
    graph = _checked(run_capture(req))
    assert graph["target"]["kind"] == "linen"
    labels = dict(_inputs(graph))
    assert labels["params/Dense_2/kernel"] == "parameter"
    assert labels["batch_stats/BatchNorm_2/mean"] == "state"
    kernel = next(p for p in graph["inputs"] if p["label"] == "params/Dense_0/kernel")
    assert _shape(graph, kernel) == [3, 4]  # features=4 from the outer partial
    assert ("batch_stats/BatchNorm_0/var", "state") in _outputs(graph)
    assert {n["scope"] for n in graph["nodes"]} >= {"Tower/Dense_0", "Tower/BatchNorm_2"}


def test_linen_partial_with_more_init_kwargs(run_capture: Run) -> None:
    req = request(
        "real_models.py",
        "TinyTower",
        array(2, 3),
        kwargs={"train": static(False)},
        init={"args": [], "kwargs": {"features": 5}},
    )
    graph = _checked(run_capture(req))
    assert _shape(graph, graph["outputs"][0]) == [2, 5]


def test_nnx_and_equinox_partial_presets_get_rngs_and_key(run_capture: Run) -> None:
    nnx_graph = _checked(run_capture(request("real_models.py", "NnxPreset", array(2, 4), init={"args": [3]})))
    assert nnx_graph["target"]["kind"] == "nnx"
    assert _inputs(nnx_graph)[:2] == [("linear/bias", "parameter"), ("linear/kernel", "parameter")]
    assert _shape(nnx_graph, nnx_graph["outputs"][0]) == [2, 3]
    eqx_graph = _checked(run_capture(request("real_models.py", "EqxPreset", array(4), init={"kwargs": {"din": 4}})))
    assert eqx_graph["target"]["kind"] == "equinox"
    assert ("linear/weight", "parameter") in _inputs(eqx_graph)
    assert _shape(eqx_graph, eqx_graph["outputs"][0]) == [2]


def test_function_returning_a_module_says_what_to_do(run_capture: Run) -> None:
    result = run_capture(request("real_models.py", "make_model", 4, kind="function"))
    assert not result["ok"]
    message = result["error"]["message"]
    assert "returned a real_models.Tower at out, not an array" in message
    assert "init.factory" in message
    assert "jaxlsp/worker" not in message  # no worker internals in the user's message


def test_linen_boxed_parameters_are_labelled_by_variable_path(run_capture: Run) -> None:
    graph = _checked(run_capture(request("real_models.py", "Sharded", array(2, 3))))
    assert _inputs(graph) == [
        ("params/Dense_0/bias", "parameter"),
        ("params/Dense_0/kernel", "parameter"),
        ("args/0", "input"),
    ]
    grads = _checked(run_capture(request("real_models.py", "Sharded", array(2, 3), transform="grad")))
    assert [label for label, _ in _outputs(grads)] == ["grad/params/Dense_0/bias", "grad/params/Dense_0/kernel"]


def test_key_made_inside_the_program_keeps_coverage_complete(run_capture: Run) -> None:
    graph = _checked(run_capture(request("real_models.py", "noise", array(dtype="int32"), kind="function")))
    seeds = [n for n in graph["nodes"] if n["primitive"] == "random_seed"]
    assert seeds, [n["primitive"] for n in graph["nodes"]]
    assert seeds[0]["params"]["impl"]["type"] == "PRNGImpl"
    assert graph["coverage"]["complete"] is True
    assert graph["coverage"]["opaque"] == []


def test_nnx_in_place_updates_are_state_outputs(run_capture: Run) -> None:
    graph = _checked(run_capture(request("real_models.py", "Counted", array(2, 3), init={"args": [3]})))
    outs = _outputs(graph)
    assert outs[0] == ("out", "output")
    assert set(outs[1:]) == {
        ("count", "state"),
        ("bn/mean", "state"),
        ("bn/var", "state"),
        ("dropout/rngs/count", "state"),
        ("last", "state"),
    }
    produced = {p["value"] for p in graph["outputs"]}
    inputs = {p["value"] for p in graph["inputs"]}
    assert not produced & inputs  # every state output is a new value, not a pass-through


def test_nnx_without_updates_has_no_state_outputs(run_capture: Run) -> None:
    graph = _checked(run_capture(request("real_models.py", "Frozen", array(2, 3), init={"args": [3]})))
    assert _outputs(graph) == [("out", "output")]
    assert ("bn/mean", "state") in _inputs(graph)


def _params() -> dict[str, Any]:
    return {"w": array(3)}


def test_definitions_load_goes_past_failing_optional_imports(run_capture: Run) -> None:
    req = request("real_script.py", "predict", _params(), array(4, 3), load="definitions", kind="function")
    graph = _checked(run_capture(req))
    assert _shape(graph, graph["outputs"][0]) == [4]


def test_definitions_load_missing_import_used_by_the_target(run_capture: Run) -> None:
    req = request("real_script.py", "plot", _params(), array(4, 3), load="definitions", kind="function")
    result = run_capture(req)
    assert not result["ok"]
    message = result["error"]["message"]
    assert "not_an_installed_plotting_package could not be imported" in message
    assert "line 4" in message and "install the missing package" in message
    removed = run_capture(request("real_script.py", "uses_removed", array(3), load="definitions", kind="function"))
    assert not removed["ok"]
    assert "jax.numpy.this_name_was_removed could not be imported" in removed["error"]["message"]


def test_definitions_load_names_the_skipped_statement(run_capture: Run) -> None:
    result = run_capture(request("real_script.py", "uses_data", array(3), load="definitions", kind="function"))
    assert not result["ok"]
    message = result["error"]["message"]
    assert "NameError" in message
    # batch = data[:10] is call-free but reads data, whose statement (a call) was skipped
    assert 'batch is set at line 9 of real_script.py by a statement that load = "definitions" does not run' in (message)
    assert "factory" in message
    assert result["error"].get("skipped") == "batch"  # said as data too: a live trace goes by it, not the text


def test_module_load_still_fails_on_a_missing_import(run_capture: Run) -> None:
    result = run_capture(request("real_script.py", "predict", _params(), array(4, 3), kind="function"))
    assert not result["ok"]
    assert result["error"]["kind"] == "import"
    assert "not_an_installed_plotting_package" in result["error"]["message"]


def test_linen_missing_mutable_or_rngs_says_which_profile_key(run_capture: Run) -> None:
    result = run_capture(request("real_models.py", "Noisy", array(2, 3), rngs=["dropout"]))
    assert not result["ok"]
    assert 'add it to the profile\'s mutable list (mutable = ["batch_stats"])' in result["error"]["message"]
    result = run_capture(request("real_models.py", "Noisy", array(2, 3), mutable=["batch_stats"]))
    assert not result["ok"]
    assert 'add it to the profile\'s rngs (rngs = ["dropout"])' in result["error"]["message"]
    _checked(run_capture(request("real_models.py", "Noisy", array(2, 3), rngs=["dropout"], mutable=["batch_stats"])))


def _factory(file: str, name: str, factory: str) -> dict[str, Any]:
    req = request(file, name)
    req["profile"]["inputs"] = {"factory": factory}
    return req


def test_a_train_state_argument_has_parameters_and_optimizer_state(run_capture: Run) -> None:
    # Flax's MNIST example: apply_model(state, images, labels) on a TrainState from a factory.
    graph = _checked(run_capture(_factory("train_step.py", "apply_model", "train_step:inputs")))
    roles = dict(_inputs(graph))
    assert roles["args/0/params/Dense_0/kernel"] == "parameter"
    assert roles["args/0/opt_state/0/trace/Dense_0/kernel"] == "state"  # step is a Python int: static
    assert roles["args/1"] == "input" and roles["args/2"] == "input"
    update = _checked(run_capture(_factory("train_step.py", "update_model", "train_step:step_inputs")))
    assert {role for label, role in _inputs(update) if label.startswith("args/1/")} == {"input"}  # grads


def test_arguments_named_params_and_batch_stats_say_their_role(run_capture: Run) -> None:
    graph = _checked(run_capture(_factory("train_step.py", "bn_loss", "train_step:bn_inputs")))
    assert _inputs(graph) == [
        ("args/0/BatchNorm_0/bias", "parameter"),
        ("args/0/BatchNorm_0/scale", "parameter"),
        ("args/0/Dense_0/bias", "parameter"),
        ("args/0/Dense_0/kernel", "parameter"),
        ("args/1/BatchNorm_0/mean", "state"),
        ("args/1/BatchNorm_0/var", "state"),
        ("args/2", "input"),
    ]


def test_an_equinox_filter_jit_train_step_returning_the_model(run_capture: Run) -> None:
    import sys

    graph = _checked(run_capture(_factory("eqx_train.py", "make_step", "eqx_train:inputs")))
    assert graph["target"]["kind"] == "function"  # eqx.filter_jit wraps a function in a Module
    roles = dict(_inputs(graph))
    assert roles["args/0/conv/weight"] == "parameter" and roles["args/2"] == "input"
    outputs = [label for label, _ in _outputs(graph)]
    assert "out/0/conv/weight" in outputs and "out/2" in outputs  # the updated model's arrays, the loss
    assert not [label for label in outputs if "activation" in label]  # static leaves are not outputs
    scopes = {n["scope"] for n in graph["nodes"] if n["primitive"] == "conv_general_dilated"}
    assert "conv" in scopes
    assert sys.modules["eqx_train"].FACTORY_SAW_TRACERS == [True]  # the factory ran abstractly, once


def test_a_factory_that_needs_real_values_runs_eagerly(run_capture: Run) -> None:
    graph = _checked(run_capture(_factory("eqx_train.py", "normalize", "eqx_train:concrete_inputs")))
    assert [(label, _shape(graph, p)) for (label, _), p in zip(_inputs(graph), graph["inputs"], strict=True)] == [
        ("args/0", [4])
    ]


def test_an_nnx_train_step_updates_model_and_optimizer_in_place(run_capture: Run) -> None:
    graph = _checked(run_capture(_factory("nnx_train.py", "train_step", "nnx_train:inputs")))
    roles = dict(_inputs(graph))
    assert roles["args/0/l1/kernel"] == "parameter" and roles["args/0/bn/mean"] == "state"
    outputs = dict(_outputs(graph))
    assert outputs["out"] == "output"
    # In-place updates are outputs of the program: the new weights, batch statistics, Adam moments.
    assert outputs["args/0/l1/kernel"] == "state" and outputs["args/0/bn/mean"] == "state"
    assert any(label.startswith("args/1/") and "l1/kernel" in label for label in outputs)
    scopes = {n["scope"] for n in graph["nodes"] if n["primitive"] == "dot_general"}
    assert {"l1", "l2"} <= scopes


def test_definitions_load_keeps_the_files_future_annotations(run_capture: Run) -> None:
    """Each kept statement is compiled alone: ``from __future__ import annotations`` must still hold
    for the definitions after it, or ``def f(a: F)`` evaluates ``F``, whose TypeVar call the load
    skipped (17 of tinygp's solver functions were never live)."""
    req = request("typed_ops.py", "shift", array(4, 2), load="definitions", kind="function")
    graph = _checked(run_capture(req))
    assert _shape(graph, graph["outputs"][0]) == [4, 2]
