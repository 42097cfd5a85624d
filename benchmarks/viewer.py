"""Viewer speed in headless Chromium (DESIGN.md §4), on the static HTML export of two graphs.

- synthetic: 20,000 equations in 20 modules of 1,000 (each a DAG of mixed primitives, ~1.5
  edges per node), so that expanding one module lays out 1,000 nodes at one level;
- transformer grad: ``jax.grad`` of the 12-layer Linen transformer (benchmarks/models, profile
  ``grad``, about 3,300 equations), traced with ``jaxlsp trace``;
- LLM scale (issue 29): 200,000 equations shaped like a decoder-only model, ``Decoder`` holding
  ``layers_0`` ... ``layers_31``, each of four sub-modules (``attn``, ``mlp``, two norms): the first
  view is the layers rolled up as one ``layers_* x32`` box; expanding one layer shows its four.

Figures: first paint of the collapsed top level (quick layout) and the ELK layout that follows,
both from navigation start (the page's HTML and JSON, up to 10 MB, included); then, from the click,
the expansion of a group: something useful on screen (quick layout) and its full ELK layout.
Targets: first paint <= 2 s; an expanded 1,000-node group on screen <= 1 s, laid out <= 5 s; at LLM
scale, first paint <= 2 s, one layer expanded on screen <= 500 ms, the page's JS heap <= 1.5 GiB.
Exit status 1 when a target is missed; 2 when the browser is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jaxlsp.graph import io
from jaxlsp.graph.export import to_html
from jaxlsp.graph.model import Coverage, Frame, Graph, Group, Node, Port, Value

ROOT = Path(__file__).resolve().parents[1]
MEASURE = ROOT / "benchmarks" / "viewer" / "measure.mjs"
FIRST_PAINT = 2000.0
EXPAND_QUICK = 1000.0
EXPAND_FULL = 5000.0
LLM_EXPAND = 500.0
LLM_HEAP_MIB = 1536.0
PRIMITIVES = ["dot_general", "add", "mul", "tanh", "reshape", "broadcast_in_dim", "reduce_sum", "exp"]


def synthetic(modules: int = 20, per: int = 1000) -> Graph:
    """``modules`` module groups of ``per`` nodes; node i reads node i-1 and, every third node, i-7."""
    values = [Value("v0", [4, 128], "float32")]
    nodes: list[Node] = []
    groups: list[Group] = []
    last = "v0"
    for m in range(modules):
        gid = f"g{m}"
        groups.append(Group(gid, "module", None, f"Layer_{m}"))
        start = len(nodes)
        for k in range(per):
            i = len(nodes)
            inputs = [last]
            if k % 3 == 2 and k >= 7:
                inputs.append(nodes[start + k - 7].outputs[0])
            out = f"v{i + 1}"
            shape: list[int | str] = [4, 128] if k % 5 else [4, 128, 1]
            values.append(Value(out, shape, "float32", producer=f"n{i}"))
            prim = PRIMITIVES[(k * 7 + m) % len(PRIMITIVES)]
            frame = Frame("model.py", 10 + k % 50, 4, 10 + k % 50, 30)
            nodes.append(Node(f"n{i}", prim, {}, inputs, [out], f"Layer_{m}", gid, frame, [frame]))
            last = out
    return Graph(
        target={"path": "model.py", "name": "Synthetic", "kind": "function"},
        profile={"name": None},
        versions={"jax": None, "jaxlib": None, "flax": None, "equinox": None, "python": "3"},
        coverage=Coverage(),
        sources={},
        inputs=[Port("v0", "args/0", "input")],
        outputs=[Port(last, "out", "output")],
        nodes=nodes,
        values=values,
        groups=groups,
    )


def llm(equations: int = 200_000, layers: int = 32) -> Graph:
    """A decoder-only model's shape: ``Decoder/layers_i/{attn,mlp,norm1,norm2}``, ``equations`` in all."""
    subs = ["attn", "mlp", "norm1", "norm2"]
    per = equations // (layers * len(subs))
    values = [Value("v0", [4, 128, 512], "float32")]
    nodes: list[Node] = []
    groups = [Group("root", "module", None, "Decoder")]
    last = "v0"
    for layer in range(layers):
        lid = f"L{layer}"
        groups.append(Group(lid, "module", "root", f"layers_{layer}"))
        for sub in subs:
            gid = f"{lid}_{sub}"
            groups.append(Group(gid, "module", lid, sub))
            start = len(nodes)
            for k in range(per):
                i = len(nodes)
                inputs = [last]
                if k % 3 == 2 and k >= 7:
                    inputs.append(nodes[start + k - 7].outputs[0])
                out = f"v{i + 1}"
                values.append(Value(out, [4, 128, 512], "float32", producer=f"n{i}"))
                frame = Frame("model.py", 10 + k % 50, 4, 10 + k % 50, 30)
                scope = f"Decoder/layers_{layer}/{sub}"
                prim = PRIMITIVES[k % len(PRIMITIVES)]
                nodes.append(Node(f"n{i}", prim, {}, inputs, [out], scope, gid, frame, [frame]))
                last = out
    return Graph(
        target={"path": "model.py", "name": "Decoder", "kind": "linen"},
        profile={"name": None},
        versions={"jax": None, "jaxlib": None, "flax": None, "equinox": None, "python": "3"},
        coverage=Coverage(),
        sources={},
        inputs=[Port("v0", "args/0", "input")],
        outputs=[Port(last, "out", "output")],
        nodes=nodes,
        values=values,
        groups=groups,
    )


def transformer_grad(tmp: Path) -> Graph:
    out = tmp / "transformer-grad.json"
    target = "benchmarks/models/transformer.py::Transformer"
    subprocess.run(
        [sys.executable, "-m", "jaxlsp", "trace", target, "--profile", "grad", "-o", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return io.read(out)


def measure(graph: Graph, page: Path, steps: list[dict[str, str]]) -> dict[str, Any]:
    page.write_text(to_html(graph), encoding="utf-8")
    node = shutil.which("node")
    assert node is not None
    out = subprocess.run(
        [node, str(MEASURE), str(page), json.dumps(steps)], capture_output=True, text=True, timeout=600, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"measure.mjs failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> int:
    chromium = os.environ.get("JAXLSP_CHROMIUM", "/usr/bin/chromium")
    if shutil.which("node") is None or not Path(chromium).exists():
        print(f"viewer benchmark: needs node and {chromium} (make system-deps)")
        return 2
    if not (ROOT / "editors" / "web" / "node_modules" / "playwright-core").is_dir():
        print("viewer benchmark: needs editors/web/node_modules (make viewer)")
        return 2
    ok = True
    with tempfile.TemporaryDirectory(prefix="jaxlsp-viewer-bench-") as name:
        tmp = Path(name)
        grad = transformer_grad(tmp)
        block = next(g.id for g in grad.groups if g.label == "Block_5")
        cases = [
            (
                "synthetic 20k",
                synthetic(),
                [
                    {"label": "expand a 1,000-node module", "expand": "g7"},
                    {"label": "expand another (ELK warm)", "expand": "g12"},
                ],
                True,
            ),
            (
                f"transformer grad ({len(grad.nodes):,} eqns)",
                grad,
                [
                    {"label": "expand Block_5 (267 ops, nested)", "expand": block},
                    {"label": "expand all (whole graph)", "expand": "all"},
                ],
                False,
            ),
            (
                "LLM 200k (32 layers)",
                llm(),
                [{"label": "expand layers_5 (one layer)", "expand": "L5"}],
                False,
            ),
        ]
        for label, graph, steps, thousand in cases:
            r = measure(graph, tmp / "page.html", steps)
            paint_ok = r["firstPaintMs"] <= FIRST_PAINT
            ok &= paint_ok and not r["errors"]
            print(
                f"  {label:<28} first paint {r['firstPaintMs']:6.0f} ms ({r['topItems']} boxes; target <= "
                f"{FIRST_PAINT:.0f}) {'ok' if paint_ok else 'MISSED'} | ELK layout shown at {r['firstFullMs']:6.0f} ms "
                f"| graph read at {r['graphMs']:6.0f} ms | JS heap {r['heapMiB']:.0f} MiB, "
                f"{r['heapMiBAfter']:.0f} after"
            )
            llm_case = label.startswith("LLM")
            if llm_case:
                heap_ok = max(r["heapMiB"], r["heapMiBAfter"]) <= LLM_HEAP_MIB
                ok &= heap_ok
                print(f"    JS heap target <= {LLM_HEAP_MIB:.0f} MiB {'ok' if heap_ok else 'MISSED'}")
            for s in r["steps"]:
                line = (
                    f"    {s['label']:<34} on screen {s['quickMs']:6.0f} ms, laid out {s['fullMs']:6.0f} ms "
                    f"(ELK {s['elkMs']:.0f} ms; {s['items']} boxes)"
                )
                if llm_case:
                    step_ok = s["quickMs"] <= LLM_EXPAND
                    ok &= step_ok
                    line += f" (target <= {LLM_EXPAND:.0f} on screen) {'ok' if step_ok else 'MISSED'}"
                if thousand:
                    step_ok = s["quickMs"] <= EXPAND_QUICK and s["fullMs"] <= EXPAND_FULL
                    ok &= step_ok
                    line += f" (targets <= {EXPAND_QUICK:.0f} / {EXPAND_FULL:.0f}) {'ok' if step_ok else 'MISSED'}"
                print(line)
            if r["errors"]:
                print(f"    page errors: {r['errors']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
