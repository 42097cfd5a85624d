"""Everyday JAX, faithfully (issue 14): keys, honest coverage, portable paths and one box per call,
each from the repro that once failed, traced in process with the real worker."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.export import to_dot
from jaxlsp.graph.validate import check
from tests.worker.conftest import array, graph_of, request, static

pytest.importorskip("flax")
pytest.importorskip("equinox")

Run = Callable[[dict[str, Any]], dict[str, Any]]
FILE = "everyday.py"


def key(seed: int = 0, **extra: Any) -> dict[str, Any]:
    return {"kind": "key", "seed": seed, **extra}


def made_by(factory: str) -> dict[str, Any]:
    """The object a ``module:function`` returns (a ref called with no arguments)."""
    return {"kind": "ref", "ref": factory, "args": [], "kwargs": {}}


def sound(graph: dict[str, Any]) -> dict[str, Any]:
    """The graph reads back, checks out, carries no absolute path and no frame of jaxlsp itself."""
    parsed = io.from_json(graph)
    assert check(parsed) == []
    for text in _strings(graph):
        assert not text.startswith("/") and not re.match(r"^[A-Za-z]:\\", text), text
    for node in graph["nodes"]:
        for frame in node["frames"]:
            assert "jaxlsp/" not in frame["path"] and "targets.py" not in frame["path"], frame
    return graph


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield k
            yield from _strings(v)
    elif isinstance(data, list):
        for item in data:
            yield from _strings(item)


def values(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["id"]: v for v in graph["values"]}


def ports(graph: dict[str, Any], side: str) -> list[tuple[str, str, str]]:
    """``(label, role, dtype)`` of the graph's inputs or outputs."""
    vals = values(graph)
    return [(p["label"], p["role"], vals[p["value"]]["dtype"]) for p in graph[side]]


# -- keys -------------------------------------------------------------------------------------------


def test_a_returned_key_is_an_output(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "split_step", key(), array(3)))))
    assert ports(graph, "inputs") == [("args/0", "key", "key<fry>"), ("args/1", "input", "float32")]
    assert ports(graph, "outputs") == [("out/0", "output", "key<fry>"), ("out/1", "output", "float32")]


def test_a_key_given_to_an_equinox_constructor_is_traced_in_the_abstract_init(run_capture: Run) -> None:
    init = {"args": [], "kwargs": {"d": static(6), "key": key(0)}}
    graph = sound(graph_of(run_capture(request(FILE, "Splitter", array(6), init=init))))
    assert ports(graph, "inputs") == [
        ("w", "parameter", "float32"),
        ("b", "parameter", "float32"),
        ("args/0", "input", "float32"),
    ]
    assert [n["primitive"] for n in graph["nodes"]] == ["dot_general", "add"]


def test_a_key_given_for_nnx_rngs_becomes_rngs(run_capture: Run) -> None:
    init = {"args": [], "kwargs": {"rngs": key(3)}}
    graph = sound(graph_of(run_capture(request(FILE, "Dropper", array(2, 4), init=init))))
    labels = [label for label, _, _ in ports(graph, "inputs")]
    assert "lin/kernel" in labels and "drop/rngs/key" in labels


def test_a_legacy_uint32_key_is_a_key(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "legacy_noise", key(0, legacy=True), array(3)))))
    vals = values(graph)
    first = graph["inputs"][0]
    assert (first["role"], vals[first["value"]]["dtype"], vals[first["value"]]["shape"]) == ("key", "uint32", [2])
    wide = array(2, dtype="uint32")
    graph = sound(graph_of(run_capture(request(FILE, "legacy_noise", wide, array(3)))))
    assert ports(graph, "inputs")[0] == ("args/0", "input", "uint32")


def test_an_nnx_jit_train_step_with_dropout(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "train_step", made_by("everyday:make_dropper"), array(2, 4)))))
    # the Dropout's rng count advanced; the parameters and the rng key were only read
    assert ports(graph, "outputs") == [("out", "output", "float32"), ("args/0/drop/rngs/count", "state", "uint32")]
    assert ("args/0/drop/rngs/key", "key", "key<fry>") in ports(graph, "inputs")


def test_a_function_targets_init_factory_supplies_the_callable(run_capture: Run) -> None:
    req = request(FILE, "scaled", array(3), kind="function", init={"factory": "everyday:make_scaled"})
    graph = sound(graph_of(run_capture(req)))
    (node,) = graph["nodes"]
    assert node["primitive"] == "mul" and values(graph)[node["inputs"][1]]["literal"] == 3.0
    refused = run_capture(request(FILE, "scaled", array(3), init={"args": [static(2)], "kwargs": {}}))
    assert refused["ok"] is False and refused["error"]["kind"] == "refused"
    assert "init arguments" in refused["error"]["message"] and "init = { factory" in refused["error"]["message"]


# -- coverage ----------------------------------------------------------------------------------------


def test_unserialisable_params_are_text_not_gaps(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "on_cpu", array(3)))))
    put = next(n for n in graph["nodes"] if n["primitive"] == "device_put")
    assert put["params"]["devices"] == ["cpu:0"]
    assert graph["coverage"] == {"scope": "traced_program", "complete": True, "opaque": [], "notes": [], "effects": []}
    graph = sound(graph_of(run_capture(request(FILE, "by_size", array("b", 3), symbolic=["b"]))))
    dim = next(n for n in graph["nodes"] if n["primitive"] == "dim_as_value")
    assert dim["params"]["dim"] == "b"
    assert graph["coverage"]["complete"] is True


def test_debug_callbacks_are_notes(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "debugged", array(3)))))
    coverage = graph["coverage"]
    assert coverage["complete"] is True and coverage["opaque"] == []
    assert coverage["effects"] == ["debug_callback"]
    assert any("debug_callback" in note for note in coverage["notes"])


def test_a_pure_callback_is_an_opaque_region(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "calls_back", array(3)))))
    callback = next(n for n in graph["nodes"] if n["primitive"] == "pure_callback")
    assert graph["coverage"]["complete"] is False
    assert [o["node"] for o in graph["coverage"]["opaque"]] == [callback["id"]]
    assert graph["coverage"]["opaque"][0]["reason"].startswith("pure_callback: calls back into Python")


# -- presentation ------------------------------------------------------------------------------------


def _one_box_per_call(graph: dict[str, Any]) -> None:
    """Every equation that owns regions sits inside the outermost of them, never beside it."""
    groups = {g["id"]: g for g in graph["groups"]}
    nodes = {n["id"]: n for n in graph["nodes"]}
    for group in graph["groups"]:
        if group["node"] is None:
            continue
        outermost = group
        while outermost["parent"] is not None and groups[outermost["parent"]]["node"] == group["node"]:
            outermost = groups[outermost["parent"]]
        assert nodes[group["node"]]["group"] == outermost["id"], (group, nodes[group["node"]])


def test_a_custom_jvp_call_is_one_box(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "relu_twice", array(3)))))
    _one_box_per_call(graph)
    groups = {g["id"]: g for g in graph["groups"]}
    for call in (n for n in graph["nodes"] if n["primitive"] == "custom_jvp_call"):
        assert (groups[call["group"]]["kind"], groups[call["group"]]["label"]) == ("custom_jvp", "custom_jvp(relu)")
    # at the top level: no custom_jvp_call node beside its own custom_jvp(relu) group
    top = [n["primitive"] for n in graph["nodes"] if n["group"] is None]
    assert "custom_jvp_call" not in top and "jit" not in top


def test_a_jitted_function_is_one_box(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "attend", array(2, 4), array(3, 4)))))
    _one_box_per_call(graph)
    jit = next(n for n in graph["nodes"] if n["primitive"] == "jit" and n["params"].get("name") == "attention")
    box = next(g for g in graph["groups"] if g["node"] == jit["id"])
    assert (box["label"], jit["group"]) == ("jit(attention)", box["id"])
    assert [n["primitive"] for n in graph["nodes"] if n["group"] is None] == ["mul"]


def test_the_dot_export_connects_loop_bodies(run_capture: Run) -> None:
    graph = sound(graph_of(run_capture(request(FILE, "loops", array(4)))))
    dot = to_dot(io.from_json(graph))
    groups = {g["id"]: g for g in graph["groups"]}
    bodies = [
        n for n in graph["nodes"] if n["group"] in groups and groups[n["group"]]["kind"] in ("scan", "while_body")
    ]
    assert bodies
    for node in bodies:
        if node["id"] in (groups[node["group"]]["node"],):
            continue
        assert re.search(rf'-> "n:{node["id"]}"', dot), f"{node['primitive']} {node['id']} has no incoming edge"


# -- portable graphs ---------------------------------------------------------------------------------


def test_no_frame_of_jaxlsp_and_relative_paths(run_capture: Run) -> None:
    """Every node's stack once ended in three frames of the worker (targets.py ...
    ``_linen_plan.<locals>.apply``): they are dropped at capture, and the rest is relative."""
    graph = sound(graph_of(run_capture(request("models_linen.py", "MLP", array(2, 5)))))
    functions = {f.get("function") for n in graph["nodes"] for f in n["frames"]}
    assert functions == {"MLP.__call__", "Dense.__call__"}, functions
    paths = {(f["path"], f.get("package")) for n in graph["nodes"] for f in n["frames"]}
    assert paths == {("models_linen.py", None), ("flax/linen/linear.py", "flax")}
    assert graph["target"]["path"] == "models_linen.py" and list(graph["sources"]) == ["models_linen.py"]


def test_a_key_among_linen_fields_is_a_real_key(run_capture: Run) -> None:
    init = {"args": [], "kwargs": {"key": key(5)}}
    graph = sound(graph_of(run_capture(request(FILE, "NoisyDense", array(2, 4), init=init))))
    constants = [(p["role"], values(graph)[p["value"]]["dtype"]) for p in graph["inputs"] if p["role"] == "constant"]
    assert constants == [("constant", "key<fry>")]  # the field's key, closed over by apply
    assert "random_bits" in {n["primitive"] for n in graph["nodes"]}


def test_an_optimizer_passed_alone_reports_what_its_update_changed(run_capture: Run) -> None:
    """An nnx.ModelAndOptimizer is updated in place like a model: the parameters and the step it
    changed are state outputs (they used to be missed when no nnx.Module was an argument)."""
    optimizer = made_by("everyday:make_model_and_optimizer")
    graph = sound(graph_of(run_capture(request(FILE, "optimizer_step", optimizer, array(4, 2)))))
    assert [(label, role) for label, role, _ in ports(graph, "outputs")] == [
        ("out", "output"),
        ("args/0/model/bias", "state"),
        ("args/0/model/kernel", "state"),
        ("args/0/step", "state"),
    ]
    assert "model" in {n["scope"] for n in graph["nodes"]}  # the model's calls get its module scope
