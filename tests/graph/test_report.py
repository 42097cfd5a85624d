"""Summary figures of a hand-made graph are exact; the text fits one screen."""

from __future__ import annotations

import json

from jaxlsp.graph.model import Port, Value
from jaxlsp.graph.report import render_summary, shape_str, short_dtype, summarize
from tests.graph.test_samples import chain_graph, small_graph


def test_short_dtypes_and_shapes() -> None:
    pairs = {
        "float32": "f32",
        "bfloat16": "bf16",
        "float8_e4m3fn": "f8_e4m3fn",
        "uint8": "u8",
        "int32": "i32",
        "complex64": "c64",
        "bool": "bool",
        "key<fry>": "key<fry>",
    }
    assert {d: short_dtype(d) for d in pairs} == pairs
    assert shape_str(Value("v", [4, 10], "float32")) == "f32[4,10]"
    assert shape_str(Value("v", [], "int32")) == "i32[]"
    assert shape_str(Value("v", ["b", "2*b", 3], "bfloat16")) == "bf16[b,2*b,3]"


def test_a_sharded_value_is_spelled_as_jax_prints_its_type() -> None:
    split = Value("v0", [8, 64], "float32", sharding={"spec": [["x"], None]})
    assert shape_str(split) == "f32[8@x,64]"
    both = Value("v1", [8, "b"], "bfloat16", sharding={"spec": [["x", "y"], ["z"]]})
    assert shape_str(both) == "bf16[8@(x,y),b@z]"
    partial = Value(
        "v2", [8, 32], "float32", sharding={"spec": [None, None], "unreduced": ["x"], "varying": ["y", "z"]}
    )
    assert shape_str(partial) == "f32[8,32]{V:(y,z), U:x}"
    assert shape_str(Value("v3", [], "float32", sharding={"spec": [], "reduced": ["x"]})) == "f32[]{R:x}"


def test_summary_figures_are_exact() -> None:
    s = summarize(small_graph())
    assert s["ops"] == 7
    assert s["values"] == 13
    assert s["groups"] == 4
    assert s["groupKinds"] == {"module": 2, "jit": 1, "scan": 1}
    assert list(s["groupKinds"]) == ["module", "jit", "scan"]
    assert s["parameters"] == 3 * 4 + 4
    assert s["parameterBytes"] == 16 * 4
    assert s["symbolicParameters"] == 0
    assert s["outputShapes"] == ["f32[b,4]", "f32[b,4]"]
    assert s["inputs"] == [
        {"label": "params/Dense_0/kernel", "role": "parameter", "shape": "f32[3,4]"},
        {"label": "params/Dense_0/bias", "role": "parameter", "shape": "f32[4]"},
        {"label": "args/0", "role": "input", "shape": "f32[b,3]"},
        {"label": "args/1", "role": "key", "shape": "key<fry>[]"},
    ]
    assert s["topScopes"] == [
        {"scope": "Model", "ops": 3},
        {"scope": "", "ops": 2},
        {"scope": "Model/Dense_0", "ops": 2},
    ]
    assert s["primitives"] == {"add": 1, "dot_general": 1, "jit": 1, "max": 1, "mul": 1, "scan": 1, "tanh": 1}
    assert s["complete"] is True and s["opaque"] == []
    assert s["profile"] == "default"
    json.dumps(s, allow_nan=False)  # JSON-safe


def test_parameters_with_symbolic_or_unknown_dtypes() -> None:
    graph = small_graph()
    graph.values.append(Value("v20", ["b", 8], "float32"))
    graph.values.append(Value("v21", [2, 5], "float8_e4m3fn"))
    graph.inputs += [Port("v20", "params/odd", "parameter"), Port("v21", "params/f8", "parameter")]
    s = summarize(graph)
    assert s["parameters"] == 16 + 10
    assert s["parameterBytes"] is None  # float8 has no entry in the byte table
    assert s["symbolicParameters"] == 1
    assert "26 parameters + 1 with symbolic shapes" in render_summary(graph)


def test_render_summary_text() -> None:
    assert render_summary(small_graph()) == "\n".join(
        [
            "model.py::MLP (linen)  profile default",
            "jax 0.10.2, jaxlib 0.10.2, flax 0.12.8, python 3.11.7",
            "7 ops, 13 values, 4 groups (module 2, jit 1, scan 1)",
            "16 parameters (64 B)",
            "inputs   params/Dense_0/kernel  f32[3,4]         parameter",
            "         params/Dense_0/bias    f32[4]           parameter",
            "         args/0                 f32[b,3]         input",
            "         args/1                 key<fry>[]       key",
            "outputs  out/0                  f32[b,4]         output",
            "         out/1                  f32[b,4]         output",
            "top scopes by ops:",
            "  3  Model",
            "  2  (top level)",
            "  2  Model/Dense_0",
            "primitives: add 1, dot_general 1, jit 1, max 1, mul 1, scan 1, tanh 1",
            "coverage: complete, nothing opaque",
            "note: control-flow bodies are traced, not executed",
        ]
    )


def test_render_summary_fits_one_screen_for_a_big_incomplete_graph() -> None:
    graph = chain_graph(20_000, group_every=10)
    for i in range(40):
        graph.values.append(Value(f"p{i}", [256, 1024], "bfloat16"))
        graph.inputs.append(Port(f"p{i}", f"params/layers/{i}/kernel", "parameter"))
        graph.nodes[i].primitive = f"prim_{i}"
    graph.coverage.complete = False
    graph.coverage.opaque = [{"node": f"n{i}", "reason": "pure_callback"} for i in range(9)]
    graph.coverage.notes = ["a", "b", "c", "d", "e"]
    text = render_summary(graph)
    lines = text.splitlines()
    assert len(lines) <= 30, text
    assert max(map(len, lines)) <= 160
    assert "20,000 ops, 20,041 values, 2,000 groups (module 2,000)" in text
    assert "10,485,760 parameters (21.0 MB)" in text
    assert "... and 35 more" in text
    assert "coverage: INCOMPLETE, 9 opaque regions" in text
    assert "  n0: pure_callback" in text
    assert text.isascii()
