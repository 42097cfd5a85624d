"""Shardings in the viewer (issue 28): a sharded value's type on its box as jax prints it
(``f32[8@x,64]``), the spec a ``reshard`` moves to, a ``shard_map``'s in and out specs on its
box, and the mesh in the details; headless Chromium on the static export."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.graph.export import to_html
from jaxlsp.graph.model import Coverage, Frame, Graph, Group, Node, Port, Value
from tests.graph.test_samples import SHA
from tests.viewer.conftest import Browser

MESH = {"axisNames": ["x"], "axisSizes": [4], "axisTypes": ["Explicit"]}
SPLIT = {"spec": [["x"], None]}
TO_X = {
    "type": "NamedSharding",
    "spec": "P('x', None)",
    "mesh": {"type": "AbstractMesh", "axis_names": ["x"], "axis_sizes": [4], "axis_types": ["Explicit"]},
}


def sharded_mlp() -> Graph:
    """The graph ``jaxlsp trace`` writes for tests/workspaces/sharding/model.py::mlp, cut down:
    a batch split over ``x``, a reshard, and a shard_map whose body is per device."""
    here = Frame("model.py", 25, 8, 25, 40, "mlp")

    def node(
        nid: str, prim: str, ins: list[str], outs: list[str], params: dict[str, object], group: str | None
    ) -> Node:
        return Node(nid, prim, params, ins, outs, "", group, here, [here])

    return Graph(
        target={"path": "model.py", "name": "mlp", "kind": "function"},
        profile={"name": "mlp"},
        versions={"jax": "0.10.2", "jaxlib": "0.10.2", "flax": None, "equinox": None, "python": "3.11.7"},
        coverage=Coverage(),
        sources={"model.py": SHA},
        inputs=[Port("v0", "args/0/w1", "parameter"), Port("v1", "args/1", "input")],
        outputs=[Port("v7", "out", "output")],
        nodes=[
            node("n0", "dot_general", ["v1", "v0"], ["v2"], {}, None),
            node("n1", "tanh", ["v2"], ["v3"], {}, None),
            node("n2", "reshard", ["v3"], ["v4"], {"dst_sharding": TO_X, "concrete_mesh": None}, None),
            node(
                "n3",
                "shard_map",
                ["v4"],
                ["v7"],
                {"in_specs": ["P('x', None)"], "out_specs": ["P('x', None)"], "jaxpr": {"group": "g0"}},
                "g0",
            ),
            node("n4", "sin", ["v5"], ["v6"], {}, "g0"),
        ],
        values=[
            Value("v0", [16, 64], "float32"),
            Value("v1", [8, 16], "float32", sharding=SPLIT),
            Value("v2", [8, 64], "float32", producer="n0", sharding=SPLIT),
            Value("v3", [8, 64], "float32", producer="n1", sharding=SPLIT),
            Value("v4", [8, 64], "float32", producer="n2", sharding=SPLIT),
            Value("v5", [2, 64], "float32", per_device=True, sharding={"spec": [None, None], "varying": ["x"]}),
            Value(
                "v6",
                [2, 64],
                "float32",
                producer="n4",
                per_device=True,
                sharding={"spec": [None, None], "varying": ["x"]},
            ),
            Value("v7", [8, 64], "float32", producer="n3", sharding=SPLIT),
        ],
        groups=[Group("g0", "shard_map", None, "shard_map(x: 4)", "n3")],
        mesh=MESH,
    )


async def test_the_viewer_shows_shardings_and_specs(tmp_path: Path, browser: Browser) -> None:
    page = tmp_path / "graph.html"
    page.write_text(to_html(sharded_mlp()), encoding="utf-8")
    assert await browser.send("goto", url=page.as_uri()) == 200
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    sub = '(id) => document.querySelector(`[data-id="${id}"] .jx-t2`)?.textContent'
    assert await browser.eval(f"({sub})('n1')") == "f32[8@x,64]"
    assert await browser.eval(f"({sub})('n2')") == "f32[8@x,64] · P('x', None)"
    assert await browser.eval(f"({sub})('n4')") == "f32[2,64]{V:x}"
    # the one top-level group opens: its head says the shard_map's specs
    head = await browser.eval("document.querySelector('[data-id=\"g0\"] .jx-head').textContent")
    assert "in P('x', None) → out P('x', None)" in head, head
    await browser.send("click", selector='[data-id="n2"]')
    rows = await browser.wait(
        "[...document.querySelectorAll('.jx-details .jx-row')].map(r => r.textContent).join('|').includes('mesh')"
        " && [...document.querySelectorAll('.jx-details .jx-row')].map(r => r.textContent).join('|')"
    )
    assert "reshards toP('x', None)" in rows and "meshx: 4 (Explicit)" in rows, rows
    assert "inputsf32[8@x,64]" in rows
