"""Hand-made graphs shared by the graph tests (and a check that they are sound)."""

from __future__ import annotations

import hashlib

from jaxlsp.graph.model import Coverage, Frame, Graph, Group, Node, Port, Value
from jaxlsp.graph.validate import check

SHA = hashlib.sha256(b"model").hexdigest()


def small_graph() -> Graph:
    """A Dense layer in a Model module, a jit-wrapped relu (a literal, a node without source),
    a closed-over constant, a scan region, a PRNG key and a symbolic batch dimension ``b``.

    Groups: g0 module Model > g1 module Dense_0; g2 jit(relu) (top level, owned by n2);
    g3 scan (in Model, owned by n5).
    """
    here = Frame("model.py", 5, 8, 5, 20, "MLP.__call__")
    caller = Frame("train.py", 10, 4, 10, 30, "main")
    return Graph(
        target={"path": "model.py", "name": "MLP", "kind": "linen"},
        profile={"name": "default", "batch": 2},
        versions={"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "equinox": None, "python": "3.11.7"},
        coverage=Coverage(notes=["control-flow bodies are traced, not executed"]),
        sources={"model.py": SHA},
        inputs=[
            Port("v0", "params/Dense_0/kernel", "parameter"),
            Port("v1", "params/Dense_0/bias", "parameter"),
            Port("v2", "args/0", "input"),
            Port("v3", "args/1", "key"),
        ],
        outputs=[Port("v10", "out/0", "output"), Port("v12", "out/1", "output")],
        nodes=[
            Node(
                "n0",
                "dot_general",
                {"dimension_numbers": [[[1], [0]], [[], []]], "precision": None, "preferred_element_type": "float32"},
                ["v2", "v0"],
                ["v4"],
                "Model/Dense_0",
                "g1",
                here,
                [here, caller],
            ),
            Node("n1", "add", {}, ["v4", "v1"], ["v5"], "Model/Dense_0", "g1", here, [here, caller]),
            Node(
                "n2",
                "jit",
                {"name": "relu", "jaxpr": {"opaque": "{ lambda ; a:f32[b,4]. ... }"}},
                ["v5"],
                ["v6"],
                "",
                None,
                here,
            ),
            Node("n3", "max", {}, ["v5", "v7"], ["v8"], "", "g2", None, transforms=["vmap"]),
            Node("n4", "mul", {}, ["v6", "v9"], ["v10"], "Model", "g0", Frame("model.py", 7, 11, 7, 18)),
            Node("n5", "scan", {"length": 12, "reverse": False}, ["v10"], ["v12"], "Model", "g0", None),
            Node("n6", "tanh", {}, ["v10"], ["v11"], "Model", "g3", None),
        ],
        values=[
            Value("v0", [3, 4], "float32"),
            Value("v1", [4], "float32"),
            Value("v2", ["b", 3], "float32"),
            Value("v3", [], "key<fry>"),
            Value("v4", ["b", 4], "float32", producer="n0"),
            Value("v5", ["b", 4], "float32", producer="n1"),
            Value("v6", ["b", 4], "float32", producer="n2"),
            Value("v7", [], "float32", weak_type=True, literal=0.0, kind="literal"),
            Value("v8", ["b", 4], "float32", producer="n3"),
            Value("v9", [4], "float32", literal=[1.0, 2.0, 3.0, 4.0], kind="const"),
            Value("v10", ["b", 4], "float32", producer="n4"),
            Value("v11", ["b", 4], "float32", producer="n6"),
            Value("v12", ["b", 4], "float32", producer="n5"),
        ],
        groups=[
            Group("g0", "module", None, "Model"),
            Group("g1", "module", "g0", "Dense_0"),
            Group("g2", "jit", None, "jit(relu)", "n2"),
            Group("g3", "scan", "g0", "scan (length 12)", "n5"),
        ],
    )


def chain_graph(n: int, *, group_every: int = 0) -> Graph:
    """A chain of ``n`` ``sin`` nodes over one f32[4,128] input; every ``group_every`` nodes share a module."""
    nodes = []
    values = [Value("v0", [4, 128], "float32")]
    groups = []
    for i in range(n):
        gid = None
        if group_every:
            k = i // group_every
            gid = f"g{k}"
            if i % group_every == 0:
                groups.append(Group(gid, "module", None, f"Block_{k}"))
        scope = f"Block_{i // group_every}" if group_every else ""
        nodes.append(Node(f"n{i}", "sin", {}, [f"v{i}"], [f"v{i + 1}"], scope, gid, Frame("m.py", 1 + i, 0, 1 + i, 9)))
        values.append(Value(f"v{i + 1}", [4, 128], "float32", producer=f"n{i}"))
    return Graph(
        target={"path": "m.py", "name": "f", "kind": "function"},
        profile={"name": None},
        versions={"jax": "0.10.2", "jaxlib": "0.10.2", "flax": None, "equinox": None, "python": "3.11.7"},
        coverage=Coverage(),
        sources={"m.py": SHA},
        inputs=[Port("v0", "args/0", "input")],
        outputs=[Port(f"v{n}", "out", "output")],
        nodes=nodes,
        values=values,
        groups=groups,
    )


def test_the_samples_are_sound() -> None:
    assert check(small_graph()) == []
    assert check(chain_graph(50, group_every=7)) == []
