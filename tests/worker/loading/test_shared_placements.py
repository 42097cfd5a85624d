"""The walk shares what equations repeat (a name stack's placement, a traceback's frames, a frame
stack's JSON in the packed transport): sharing never mixes up what differs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, graph_of, request

pytest.importorskip("jax")

Run = Callable[[dict[str, Any]], dict[str, Any]]

SOURCE = """\
import jax
import jax.numpy as jnp


def layer(x):
    return jnp.tanh(x) * 2.0


def scope_and_transform(x):
    with jax.named_scope("vmap"):
        a = jnp.sin(x)
    b = jax.vmap(jnp.cos)(x)
    return a + b


@jax.jit
def inner(x):
    return jnp.clip(x, 0.0, 1.0) * 3.0


@jax.jit
def outer(x):
    return inner(jnp.sin(x)) + 1.0


def twice(x):
    return outer(outer(x))


def stack(x):
    for i in range(3):
        with jax.named_scope(f"layer{i}"):
            x = layer(x)
    with jax.named_scope("layer1"):
        x = jnp.exp(x)
    return x
"""


def _by_primitive(graph: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [n for n in graph["nodes"] if n["primitive"] == name]


def test_a_scope_and_a_transform_of_one_name_stay_apart(tmp_path: Path, run_capture: Run) -> None:
    # jax's Scope("vmap") == Transform("vmap") (one-field named tuples): a placement keyed by
    # name-stack equality would give the second what the first got.
    (tmp_path / "model.py").write_text(SOURCE)
    graph = graph_of(run_capture(request("model.py", "scope_and_transform", array(4), workspace=tmp_path)))
    (sin,) = _by_primitive(graph, "sin")
    (cos,) = _by_primitive(graph, "cos")
    assert (sin["scope"], sin["transforms"]) == ("vmap", [])
    assert (cos["scope"], cos["transforms"]) == ("", ["vmap"])


def test_repeated_layers_keep_their_own_scopes_and_the_packed_form_is_the_same_graph(
    tmp_path: Path, run_capture: Run
) -> None:
    from jaxlsp.graph import io

    (tmp_path / "model.py").write_text(SOURCE)
    plain = graph_of(run_capture(request("model.py", "stack", array(4), workspace=tmp_path)))
    tanh = _by_primitive(plain, "tanh")
    assert [n["scope"] for n in tanh] == ["layer0", "layer1", "layer2"]
    # one traceback (the loop's line, then layer's): equal frames; a group per layer, and the
    # later "layer1" scope is the first one's group again
    assert len({str(n["frames"]) for n in tanh}) == 1 and tanh[0]["frames"]
    groups = {g["id"]: g["label"] for g in plain["groups"]}
    assert [groups[n["group"]] for n in tanh] == ["layer0", "layer1", "layer2"]
    (exp,) = _by_primitive(plain, "exp")
    assert exp["group"] == tanh[1]["group"] and exp["frames"] != tanh[1]["frames"]

    req = request("model.py", "stack", array(4), workspace=tmp_path)
    req["transport"] = "packed"
    packed = graph_of(run_capture(req))
    assert io.to_json(io.from_json(packed)) == io.to_json(io.from_json(plain))


def test_equations_that_share_their_params_share_one_json_form_and_keep_their_own_groups(
    tmp_path: Path, run_capture: Run
) -> None:
    # ``outer``'s body is traced once and walked twice: its equations (and their params) are the
    # very same objects both times. Plain params are made once; a jit's params name its own
    # region's group, which each walk makes anew.
    import jax
    import jax.numpy as jnp

    from jaxlsp.worker.core.failures import Workspace
    from jaxlsp.worker.tracing.build import GraphBuilder
    from jaxlsp.worker.tracing.params import jsonable

    (tmp_path / "model.py").write_text(SOURCE)
    sys_path = list(sys.path)
    sys.path.insert(0, str(tmp_path))
    try:
        import model  # type: ignore[import-not-found]

        closed = jax.make_jaxpr(model.twice)(jnp.zeros(4))
    finally:
        sys.path[:] = sys_path
        sys.modules.pop("model", None)
    builder = GraphBuilder(Workspace(str(tmp_path)), keep_equations=True)
    builder.build(closed, [], [])
    for node, eqn in zip(builder.nodes, builder.eqns, strict=True):
        if node.primitive not in ("jit", "pjit"):
            assert node.params == {str(k): jsonable(v, {}, str(k)) for k, v in eqn.params.items()}
    by_equation: dict[int, list[Any]] = {}
    for node, eqn in zip(builder.nodes, builder.eqns, strict=True):
        if node.primitive == "convert_element_type":  # jnp.clip's, in ``outer``'s body
            by_equation.setdefault(id(eqn), []).append(node)
    assert [len(nodes) for nodes in by_equation.values()] == [2, 2]
    assert all(a.params is b.params and a.params["new_dtype"] == "float32" for a, b in by_equation.values())
    inner_calls = [n for n in builder.nodes if n.primitive in ("jit", "pjit") and n.params.get("name") == "inner"]
    assert len(inner_calls) == 2
    groups = [n.params["jaxpr"] for n in inner_calls]
    assert groups[0] != groups[1] and {g["group"] for g in groups} == {n.group for n in inner_calls}
