"""Module scopes inside scan-over-layers models: modules rebuilt by ``nnx.scan`` / ``eqx.combine``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, graph_of, request

pytest.importorskip("jax")

Run = Callable[[dict[str, Any]], dict[str, Any]]

SCAN_WORKSPACE = Path(__file__).resolve().parents[2] / "workspaces" / "capture_scan"


def _request(file: str, name: str, *args: Any) -> dict[str, Any]:
    req = request(file, name, *args)
    req["target"]["path"] = str(SCAN_WORKSPACE / file)
    req["workspaceRoot"] = str(SCAN_WORKSPACE)
    return req


def _group_path(graph: dict[str, Any], gid: str | None) -> list[tuple[str, str]]:
    groups = {g["id"]: g for g in graph["groups"]}
    out: list[tuple[str, str]] = []
    while gid is not None:
        out.insert(0, (groups[gid]["kind"], groups[gid]["label"]))
        gid = groups[gid]["parent"]
    return out


def _inside_scan(graph: dict[str, Any]) -> list[dict[str, Any]]:
    scan = next(g for g in graph["groups"] if g["kind"] == "scan")
    return [
        n
        for n in graph["nodes"]
        if n["group"] is not None and scan["id"] in _ancestors(graph, n["group"]) and n["id"] != scan["node"]
    ]


def _ancestors(graph: dict[str, Any], gid: str | None) -> set[str]:
    groups = {g["id"]: g for g in graph["groups"]}
    out: set[str] = set()
    while gid is not None:
        out.add(gid)
        gid = groups[gid]["parent"]
    return out


def _check_stacked(graph: dict[str, Any], norm: str) -> None:
    inner = _inside_scan(graph)
    assert {n["scope"] for n in inner} == {"blocks", "blocks/linear", f"blocks/{norm}"}
    dot = next(n for n in inner if n["primitive"] == "dot_general")
    assert dot["scope"] == "blocks/linear"
    scan = ("scan", "scan (length 3)")
    assert _group_path(graph, dot["group"]) == [scan, ("module", "blocks"), ("module", "linear")]
    modules = {(g["kind"], g["label"]) for g in graph["groups"] if g["parent"] is not None}
    assert {("module", "blocks"), ("module", "linear"), ("module", norm)} <= modules
    blocks = next(g for g in graph["groups"] if g["kind"] == "module" and g["label"] == "blocks")
    assert _group_path(graph, blocks["id"]) == [scan, ("module", "blocks")]
    outside = [n for n in graph["nodes"] if n not in inner and n["primitive"] == "dot_general"]
    assert [n["scope"] for n in outside] == ["readout"]


def test_nnx_scan_over_layers_scopes(run_capture: Run) -> None:
    graph = graph_of(run_capture(_request("scan_nnx.py", "StackedNet", array(4, 6))))
    assert graph["target"]["kind"] == "nnx"
    _check_stacked(graph, "bn")


def test_equinox_stacked_layers_scopes(run_capture: Run) -> None:
    graph = graph_of(run_capture(_request("scan_eqx.py", "StackedNet", array(6))))
    assert graph["target"]["kind"] == "equinox"
    _check_stacked(graph, "norm")


def test_ambiguous_rebuilt_module_gets_class_name(run_capture: Run) -> None:
    graph = graph_of(run_capture(_request("rebuilt_eqx.py", "Twins", array(5))))
    dots = [n for n in graph["nodes"] if n["primitive"] == "dot_general"]
    assert [n["scope"] for n in dots] == ["Linear", "second"]


def test_scan_classes_are_restored(run_capture: Run) -> None:
    import sys

    graph_of(run_capture(_request("scan_nnx.py", "StackedNet", array(4, 6))))
    module = sys.modules["scan_nnx"]
    assert "jaxlsp" not in str(module.Cell.__call__.__code__.co_filename)


def test_nnx_methods_other_than_call_open_their_module_scope(run_capture: Run) -> None:
    graph = graph_of(run_capture(_request("methods.py", "Net.encode", array(3, 4))))
    scopes = [(n["primitive"], n["scope"]) for n in graph["nodes"]]
    # Block.half's own multiply belongs to blocks/0, its Linear call to blocks/0/lin.
    assert ("mul", "blocks/0") in scopes and ("dot_general", "blocks/0/lin") in scopes
    assert ("dot_general", "head") in scopes


def test_equinox_methods_other_than_call_open_their_module_scope(run_capture: Run) -> None:
    graph = graph_of(run_capture(_request("methods.py", "ENet.encode", array(4))))
    assert [(n["primitive"], n["scope"]) for n in graph["nodes"]] == [
        ("dot_general", "blocks/1/lin"),
        ("add", "blocks/1/lin"),
        ("mul", "blocks/1"),
    ]


def test_patched_methods_are_restored(run_capture: Run) -> None:
    import sys

    graph_of(run_capture(_request("methods.py", "Net.encode", array(3, 4))))
    module = sys.modules["methods"]
    assert module.Block.half.__code__.co_filename.endswith("methods.py")
    assert not hasattr(module.Block.half, "__wrapped__") and not hasattr(module.EBlock.half, "__wrapped__")


def _factory_request(name: str, factory: str) -> dict[str, Any]:
    req = _request("methods.py", name)
    req["profile"]["inputs"] = {"factory": f"methods:{factory}"}
    return req


def _roles(graph: dict[str, Any]) -> dict[str, str]:
    return {port["label"]: port["role"] for port in graph["inputs"]}


def test_a_function_of_an_nnx_model_gets_its_scopes_and_parameter_roles(run_capture: Run) -> None:
    graph = graph_of(run_capture(_factory_request("net_loss", "net_inputs")))
    roles = _roles(graph)
    assert roles["args/0/head/kernel"] == "parameter" and roles["args/1"] == "input"  # no ".../value" suffix
    scopes = {n["scope"] for n in graph["nodes"] if n["primitive"] == "dot_general"}
    assert scopes == {"blocks/0/lin", "blocks/1/lin", "head"}
    modules = {g["label"] for g in graph["groups"] if g["kind"] == "module"}
    assert {"blocks", "head"} <= modules or {"blocks/0", "head"} <= modules


def test_a_function_of_several_equinox_models_prefixes_each_and_knows_state(run_capture: Run) -> None:
    graph = graph_of(run_capture(_factory_request("two_models_loss", "enet_inputs")))
    roles = _roles(graph)
    assert roles["args/0/blocks/0/lin/weight"] == "parameter" and roles["args/1/bn/weight"] == "parameter"
    assert {role for label, role in roles.items() if label.startswith("args/2/")} == {"state"}
    assert roles["args/3"] == "input"
    scopes = {n["scope"] for n in graph["nodes"] if n["primitive"] == "dot_general"}
    assert scopes == {"args/0/blocks/0/lin", "args/0/blocks/1/lin"}
