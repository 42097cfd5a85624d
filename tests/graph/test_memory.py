"""Liveness on hand-made graphs: a body's own peak adds to what is live around its equation."""

from __future__ import annotations

from jaxlsp.graph import memory
from jaxlsp.graph.model import Coverage, Graph, Group, Node, Port, Value
from tests.graph.test_samples import SHA, chain_graph


def test_a_chain_holds_its_input_and_two_links() -> None:
    graph = chain_graph(6)  # sin chain over f32[4,128]: 2,048 bytes each
    peak = memory.peak(graph)
    # the input (held throughout), the link being read and the one being written; first at n1
    assert peak.bytes == 3 * 2048 and peak.node == "n1" and sorted(peak.live) == ["v0", "v1", "v2"]
    assert peak.inputs == 2048


def test_a_body_peak_counts_inside_its_owner() -> None:
    def value(i: int, producer: str | None, size: int = 100) -> Value:
        return Value(f"v{i}", [size], "float32", producer=producer)

    graph = Graph(
        target={"path": "m.py", "name": "f", "kind": "function"},
        profile={"name": None},
        versions={"jax": "0", "jaxlib": "0", "flax": None, "equinox": None, "python": "3"},
        coverage=Coverage(),
        sources={"m.py": SHA},
        inputs=[Port("v0", "args/0", "input")],
        outputs=[Port("v3", "out", "output")],
        nodes=[
            Node("n0", "jit", {}, ["v0"], ["v3"], "", None, None),
            Node("n1", "exp", {}, ["v0"], ["v1"], "", "g0", None),
            Node("n2", "mul", {}, ["v1", "v0"], ["v2"], "", "g0", None),
        ],
        values=[value(0, None), value(1, "n1", 1000), value(2, "n2"), value(3, "n0")],
        groups=[Group("g0", "jit", None, "jit(f)", "n0")],
    )
    peak = memory.peak(graph)
    # outside: v0 (400 B) and the jit's output v3 (400 B); inside at the mul: v1 (4,000 B) and v2
    assert peak.bytes == 400 + 400 + 4000 + 400
    assert peak.node == "n2" and set(peak.live) == {"v0", "v3", "v1", "v2"}
    assert dict(peak.by_module) == {memory.INPUTS: 400, "": 4800}
    assert memory.residuals(graph) is None  # no backward pass
