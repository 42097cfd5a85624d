"""What the tests of the graph's JSON forms share: the schemas' checks, hypothesis's random sound
graphs, and the sample graphs every form must carry unchanged (each corner of the format)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from jaxlsp.graph import io
from jaxlsp.graph.model import (
    INPUT_ROLES,
    OUTPUT_ROLES,
    VERSION_KEYS,
    Coverage,
    Frame,
    Graph,
    Group,
    Node,
    Port,
    Value,
)
from jaxlsp.graph.validate import load_compact_schema, load_schema
from tests.graph.test_costs import measured_graph
from tests.graph.test_samples import SHA, chain_graph, small_graph
from tests.robustness.test_load import synthetic_graph

DOC = (Path(__file__).resolve().parents[2] / "docs" / "graph-format.md").read_text(encoding="utf-8")
EXPANDED = Draft202012Validator(load_schema())
COMPACT = Draft202012Validator(
    load_compact_schema(),
    registry=Registry().with_resource(load_schema()["$id"], Resource.from_contents(load_schema())),
)


def schema_errors(data: Any) -> list[str]:
    """What schema.json finds wrong in an expanded (version 1) object."""
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in EXPANDED.iter_errors(data)]


def errors(validator: Draft202012Validator, data: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]


# --------------------------------------------------------------------------------------------
# Random sound graphs (hypothesis)


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | _names
_json = st.recursive(
    _json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3), max_leaves=8
)
_frames = st.builds(
    lambda path, line, n, col, width, fn: Frame(path, line, col, line + n, col + width if n == 0 else width, fn),
    st.text(min_size=1, max_size=10),
    st.integers(1, 10_000),
    st.integers(0, 3),
    st.integers(0, 200),
    st.integers(0, 80),
    st.none() | _names,
)


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    n_inputs = draw(st.integers(0, 4))
    n_nodes = draw(st.integers(0, 12))
    n_groups = draw(st.integers(0, 5))
    groups = [
        Group(f"g{i}", draw(st.sampled_from(["module", "jit", "scan", "cond", "cond_branch", "while"])),
         draw(st.none() | st.sampled_from([f"g{j}" for j in range(i)])) if i else None, draw(_names),
         draw(st.none() | st.sampled_from([f"n{j}" for j in range(n_nodes)])) if n_nodes else None)
        for i in range(n_groups)
    ]  # fmt: skip
    dims = st.lists(st.integers(0, 64) | st.sampled_from(["b", "2*b", "seq"]), max_size=3)
    dtypes = st.sampled_from(["float32", "bfloat16", "int32", "bool", "key<fry>", "float8_e4m3fn"])
    values = [Value(f"v{i}", draw(dims), draw(dtypes), draw(st.booleans())) for i in range(n_inputs)]
    nodes = []
    for i in range(n_nodes):
        ins = draw(st.lists(st.sampled_from([v.id for v in values]), max_size=3)) if values else []
        if draw(st.booleans()):
            lit = Value(
                f"v{len(values)}",
                [],
                "float32",
                True,
                None,
                draw(_json_leaf),
                draw(st.sampled_from(["literal", "const"])),
            )
            values.append(lit)
            ins.append(lit.id)
        outs = []
        for _ in range(draw(st.integers(0, 2))):
            outs.append(f"v{len(values)}")
            values.append(Value(outs[-1], draw(dims), draw(dtypes), draw(st.booleans()), f"n{i}"))
        group = draw(st.none() | st.sampled_from([g.id for g in groups])) if groups else None
        source = draw(st.none() | _frames)
        nodes.append(
            Node(f"n{i}", draw(st.sampled_from(["add", "dot_general", "jit", "scan"])), draw(st.dictionaries(_names, _json, max_size=3)),
                 ins, outs, draw(_names), group, source, draw(st.lists(_frames, max_size=2)),
                 draw(st.lists(st.sampled_from(["vmap", "jvp", "transpose"]), max_size=2)))
        )  # fmt: skip
    ids = [v.id for v in values]
    inputs = [Port(f"v{i}", draw(_names), draw(st.sampled_from(INPUT_ROLES))) for i in range(n_inputs)]
    outputs = [Port(v, draw(_names), draw(st.sampled_from(OUTPUT_ROLES))) for v in draw(st.lists(st.sampled_from(ids), max_size=3))] if ids else []  # fmt: skip
    opaque = (
        [{"node": n.id, "reason": draw(_names)} for n in nodes if draw(st.booleans())] if draw(st.booleans()) else []
    )
    return Graph(
        target={"path": draw(_names), "name": draw(_names), "kind": "function", "extra": draw(_json)},
        profile={"name": draw(st.none() | _names)},
        versions={k: draw(st.none() | _names) for k in VERSION_KEYS},
        coverage=Coverage(complete=not opaque, opaque=opaque, notes=draw(st.lists(_names, max_size=2))),
        sources={draw(_names): SHA for _ in range(draw(st.integers(0, 2)))},
        inputs=inputs,
        outputs=outputs,
        nodes=nodes,
        values=values,
        groups=groups,
    )


# --------------------------------------------------------------------------------------------
# Sample graphs: statistics and an execution, shardings and a mesh, and the ones each form must
# round-trip


def stats(**over: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "count": 6,
        "finite": 5,
        "nan": 1,
        "posInf": 0,
        "negInf": 0,
        "zeros": 1 / 6,
        "min": -1.5,
        "max": 2.0,
        "mean": 0.25,
        "std": 1.1,
        "meanAbs": 0.9,
        "histogram": {"lo": -1.5, "hi": 2.0, "counts": [1] + [0] * 30 + [4]},
        "iterations": 3,
        "firstNonFiniteIteration": [2],
    }
    stats.update(over)
    return stats


def with_values(graph: Graph) -> Graph:
    graph.values[0].stats = stats()
    graph.values[1].stats = stats(mean=math.inf, histogram=None, iterations=1)
    graph.execution = {
        "device": "cpu",
        "seconds": 0.5,
        "validation": {"status": "verified", "outputs": 1, "maxAbsError": 0.0, "maxRelError": 0.0},
        "executed": {"g0": 1},
        "firstNonFinite": {"node": "n0", "value": "v0", "primitive": "log", "kind": "nan", "message": "first"},
    }
    return graph


def sharded(graph: Graph) -> Graph:
    graph.mesh = {"axisNames": ["x", "y"], "axisSizes": [4, 2], "axisTypes": ["Explicit", "Explicit"]}
    rank = len(graph.values[0].shape)
    graph.values[0].sharding = {"spec": [["x", "y"]] + [None] * (rank - 1)}
    graph.values[1].sharding = {"spec": [None] * len(graph.values[1].shape), "unreduced": ["x"], "varying": ["y"]}
    return graph


def doc_graph() -> Graph:
    return io.from_json(json.loads(re.findall(r"```json\n(.*?)```", DOC, re.S)[0]))


def odd_graph() -> Graph:
    """Ids that are not n0, n1, ... / v0, v1, ..., a value whose producer is not the node that
    outputs it, a notebook frame, a library frame, non-finite params."""
    lib = Frame("flax/linen/linear.py", 40, 2, 41, 9, "Dense.__call__", package="flax")
    cell = Frame("nb.ipynb", 3, 0, 3, 12, "f", cell=2)
    return Graph(
        target={"path": "nb.ipynb", "name": "f", "kind": "function", "cell": 2},
        profile={"name": None},
        versions={"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "equinox": None, "python": "3.11.7"},
        coverage=Coverage(),
        sources={"nb.ipynb": SHA},
        inputs=[Port("x", "args/0", "input")],
        outputs=[Port("y", "out", "output")],
        nodes=[
            Node(
                "a", "add", {"fill": float("-inf"), "shape": [2, "b"]}, ["x", "x"], ["t"], "M", "g", cell, [lib, cell]
            ),
            Node("b", "mul", {}, ["t", "t"], ["y"], "M", "g", cell, [cell]),
        ],
        values=[
            Value("x", [2, "b"], "float32"),
            Value("t", [2, "b"], "float32", producer="a"),
            Value("y", [2, "b"], "float32", producer="a"),  # not b: kept as written
        ],
        groups=[Group("g", "module", None, "M")],
    )


def sample_graphs() -> list[Graph]:
    return [
        small_graph(),
        chain_graph(50, group_every=7),
        doc_graph(),
        with_values(small_graph()),
        measured_graph(),
        odd_graph(),
        synthetic(),
        realistic_graph(200),
    ]


def synthetic() -> Graph:
    """The robustness suite's chain (tests/robustness/test_load.py), with its versions filled in."""
    graph = synthetic_graph(300, per_group=40, path="model.py")
    graph.versions = {key: "0" for key in VERSION_KEYS}
    return graph


def realistic_graph(equations: int, layers: int = 12) -> Graph:
    """A transformer-shaped graph: per layer an attention and an MLP module, Flax frames under
    the workspace's (four deep), dot_generals with dimension numbers, broadcasts with shapes."""
    prims = ["dot_general", "add", "reshape", "transpose", "dot_general", "reduce_max", "sub", "exp", "reduce_sum"]
    prims += ["div", "dot_general", "add", "mul", "tanh", "broadcast_in_dim", "convert_element_type"]
    model = Frame("models/transformer.py", 120, 8, 120, 40, "Transformer.__call__")
    per_layer = max(1, equations // layers)
    groups = [Group("g0", "module", None, "Transformer")]
    values = [Value("v0", [8, 512, 1024], "float32")]
    nodes = []
    for i in range(equations):
        layer = min(i // per_layer, layers - 1)
        part = "attn" if (i % per_layer) < per_layer // 2 else "mlp"
        gid = f"g{1 + 2 * layer + (part == 'mlp')}"
        if len(groups) <= 1 + 2 * layer + (part == "mlp"):
            groups.append(Group(gid, "module", "g0", f"layers_{layer}/{part}"))
        prim = prims[i % len(prims)]
        params: dict[str, Any] = {}
        if prim == "dot_general":
            params = {
                "dimension_numbers": [[[2], [0]], [[], []]],
                "precision": None,
                "preferred_element_type": "float32",
            }
        elif prim == "broadcast_in_dim":
            params = {"shape": [8, 512, 1024 + i % 3], "broadcast_dimensions": [0, 1, 2], "sharding": None}
        elif prim.startswith("reduce"):
            params = {"axes": [2], "out_sharding": None}
        line = 30 + (i % 40)
        here = Frame("models/transformer.py", line, 12, line, 60, f"{part.upper()}.__call__")
        lib = Frame("flax/linen/linear.py", 250 + i % 7, 8, 250 + i % 7, 50, "Dense.__call__", package="flax")
        call = Frame("models/transformer.py", 90 + layer % 3, 8, 90 + layer % 3, 30, "Block.__call__")
        wrap = Frame("flax/linen/module.py", 700 + layer % 5, 4, 700 + layer % 5, 70, "wrapped_fn", package="flax")
        top = Frame("train.py", 12, 4, 12, 33, "loss_fn")
        stack = [here, wrap, call, wrap, model, top]
        if prim == "dot_general":
            stack = [lib, wrap, *stack]
        values.append(Value(f"v{i + 1}", [8, 512, 1024], "float32", producer=f"n{i}"))
        ins = [f"v{i}", f"v{max(0, i - 3)}"] if prim in ("add", "sub", "mul", "div", "dot_general") else [f"v{i}"]
        scope = f"Transformer/layers_{layer}/{part}"
        nodes.append(Node(f"n{i}", prim, params, ins, [f"v{i + 1}"], scope, gid, here, stack))
    return Graph(
        target={"path": "models/transformer.py", "name": "Transformer", "kind": "linen"},
        profile={"name": "default"},
        versions={"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "equinox": None, "python": "3.11.7"},
        coverage=Coverage(),
        sources={"models/transformer.py": SHA},
        inputs=[Port("v0", "args/0", "input")],
        outputs=[Port(f"v{equations}", "out", "output")],
        nodes=nodes,
        values=values,
        groups=groups,
    )


def corrupt(where: str, value: Any) -> dict[str, Any]:
    data = io.to_compact(small_graph())
    at: Any = data
    keys = where.split(".")
    for key in keys[:-1]:
        at = at[key]
    last = keys[-1]
    if "[" in last:
        name, index = last[:-1].split("[")
        at[name][int(index)] = value
    else:
        at[last] = value
    return data
