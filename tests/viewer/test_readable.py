"""The viewer's first view reads at a glance (issue 16): a readable zoom on the graph's entry,
never "fit everything" below it; the details pane collapsed in a narrow panel; the title cut at
its start so the target's name shows; weights inside the cards that use them; a minimap; edge
labels that never overlap; less detail when zoomed out; a new graph without the old selection.

Each page is the static export (or the webview contract page) of a hand-made graph, in headless
Chromium; screenshots go to build/test-artifacts/viewer/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jaxlsp.graph import io
from jaxlsp.graph.export import to_html
from jaxlsp.graph.model import Coverage, Frame, Graph, Group, Node, Port, Value
from tests.graph.test_samples import small_graph
from tests.viewer.conftest import Browser
from tests.viewer.test_viewer import webview_page

LONG_PATH = "projects/research/2024/very-long-folder-name/models/vision/encoders/layered_model.py"
MIN_TITLE_PX = 11.0

# The on-screen font size of each drawn box title (g.jx-node's first text) and where it is.
TITLES = """[...document.querySelectorAll('g.jx-node')].map((g) => {
  const t = g.querySelector('text');
  const m = t && t.getScreenCTM();
  return m ? m.a * parseFloat(getComputedStyle(t).fontSize) : null;
}).filter((x) => x !== null)"""

# Screen rectangles of the edge labels and of the boxes.
RECTS = """(() => {
  const rect = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {
    labels: [...document.querySelectorAll('.jx-edge-label')].map(rect),
    boxes: [...document.querySelectorAll('g.jx-node > .jx-box')].map(rect),
  };
})()"""


def layered(modules: int = 12, width: int = 64) -> Graph:
    """``modules`` Dense-like modules in a chain inside ``Model``; each has a kernel and a bias,
    and a different width (so that they do not roll up into one box)."""
    values = [Value("v0", [8, width], "float32")]
    inputs = [Port("v0", "args/0", "input")]
    nodes: list[Node] = []
    groups = [Group("g0", "module", None, "Model")]
    last = "v0"
    for m in range(modules):
        gid = f"g{m + 1}"
        groups.append(Group(gid, "module", "g0", f"Dense_{m}"))
        kernel, bias = f"k{m}", f"b{m}"
        wide = width + 8 * (m + 1)
        values += [Value(kernel, [wide - 8, wide], "float32"), Value(bias, [wide], "float32")]
        inputs += [
            Port(kernel, f"params/Dense_{m}/kernel", "parameter"),
            Port(bias, f"params/Dense_{m}/bias", "parameter"),
        ]
        frame = Frame("model.py", 10 + m, 8, 10 + m, 30)
        for prim, extra in (("dot_general", kernel), ("add", bias), ("tanh", None)):
            i = len(nodes)
            out = f"v{i + 1}"
            values.append(Value(out, [8, wide], "float32", producer=f"n{i}"))
            nodes.append(
                Node(
                    f"n{i}",
                    prim,
                    {},
                    [last] + ([extra] if extra else []),
                    [out],
                    f"Model/Dense_{m}",
                    gid,
                    frame,
                    [frame],
                )
            )
            last = out
    return Graph(
        target={"path": LONG_PATH, "name": "LayeredModel", "kind": "linen"},
        profile={"name": None},
        versions={"jax": None, "jaxlib": None, "flax": None, "equinox": None, "python": "3"},
        coverage=Coverage(),
        sources={},
        inputs=inputs,
        outputs=[Port(last, "out", "output")],
        nodes=nodes,
        values=values,
        groups=groups,
    )


async def _open(browser: Browser, tmp_path: Path, graph: Graph, width: int, height: int) -> None:
    page = tmp_path / f"graph-{width}.html"
    page.write_text(to_html(graph), encoding="utf-8")
    await browser.send("viewport", width=width, height=height)
    await browser.send("goto", url=page.as_uri())
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


async def test_a_large_graph_opens_readable_on_its_entry_in_an_800_px_panel(tmp_path: Path, browser: Browser) -> None:
    await _open(browser, tmp_path, layered(), 800, 600)
    marks: dict[str, Any] = await browser.eval("JSON.parse(JSON.stringify(window.__jaxlsp.marks))")
    assert marks["firstPaintWidth"] == 800
    assert marks["firstPaintTitles"] >= 3 and marks["firstPaintTitlePx"] >= MIN_TITLE_PX, marks
    # ELK's layout replaced the quick one without changing the zoom.
    sizes = await browser.eval(TITLES)
    assert len(sizes) >= 3 and min(sizes) >= MIN_TITLE_PX, sizes
    # The entry is on screen: the inputs box and the first module, near the top.
    on_screen = await browser.eval(
        """['in:input', 'g1'].map((id) => {
          const r = document.querySelector(`g.jx-node[data-id="${id}"]`).getBoundingClientRect();
          const c = document.querySelector('.jx-canvas').getBoundingClientRect();
          return r.left >= c.left && r.right <= c.right && r.top >= c.top && r.bottom <= c.bottom;
        })"""
    )
    assert on_screen == [True, True]
    # Narrow: the details pane starts collapsed; the Details button opens it.
    assert await browser.eval("getComputedStyle(document.querySelector('.jx-side')).display") == "none"
    # The path is cut at its start; the target's name is whole.
    title = await browser.eval(
        """(() => {
          const path = document.querySelector('.jx-title-path');
          const name = document.querySelector('.jx-title-name');
          const text = path.querySelector('bdi').firstChild;
          const box = path.getBoundingClientRect();
          const at = (i) => { const r = document.createRange(); r.setStart(text, i); r.setEnd(text, i + 1); return r.getBoundingClientRect(); };
          const first = at(0), last = at(text.length - 1);
          return { cut: path.scrollWidth > path.clientWidth, firstShown: first.left >= box.left - 0.5,
                   lastShown: last.right <= box.right + 0.5, name: name.textContent, nameWhole: name.scrollWidth <= name.clientWidth };
        })()"""
    )
    assert title == {
        "cut": True,
        "firstShown": False,
        "lastShown": True,
        "name": "::LayeredModel",
        "nameWhole": True,
    }, title
    # Weights are in the cards that use them, not a box with edges.
    params = await browser.eval(
        "[...document.querySelectorAll('g.jx-node[data-id=g1] .jx-param')].map((e) => e.textContent)"
    )
    assert params == ["kernel f32[64,72]", "bias f32[72]"], params
    assert await browser.eval("document.querySelector('[data-id^=\"in:param\"]')") is None
    # The graph does not fit: the minimap shows, and a click on its lower end moves the view there.
    assert await browser.eval("!document.querySelector('.jx-minimap').hidden")
    before = await browser.eval("document.querySelector('.jx-viewport').getAttribute('transform')")
    await browser.eval(
        """(() => { const m = document.querySelector('.jx-minimap'); const r = m.getBoundingClientRect();
          const at = { clientX: r.left + r.width / 2, clientY: r.bottom - 6, bubbles: true };
          m.dispatchEvent(new MouseEvent('mousedown', at)); window.dispatchEvent(new MouseEvent('mouseup', at)); })()"""
    )
    after = await browser.eval("document.querySelector('.jx-viewport').getAttribute('transform')")
    assert after != before
    assert await browser.wait("!!document.querySelector('g.jx-node[data-id=out]')")  # the graph's end is drawn now
    await browser.screenshot("readable-800.png")

    # Fit stays a button: everything in view, too small to read, so it shows boxes and titles only.
    await browser.send("click", selector="[data-action=fit]")
    await browser.wait("document.querySelector('.jx-canvas').dataset.detail !== '3'")
    assert await browser.eval("document.querySelectorAll('.jx-edge-label').length") == 0
    assert await browser.eval("document.querySelector('.jx-minimap').hidden")
    detail = await browser.eval("document.querySelector('.jx-canvas').dataset.detail")
    if detail == "1":
        assert await browser.eval("document.querySelectorAll('.jx-t2, .jx-param').length") == 0
    await browser.screenshot("fit-800.png")

    # A wide window: the details pane starts open.
    await _open(browser, tmp_path, layered(), 1400, 900)
    assert await browser.eval("getComputedStyle(document.querySelector('.jx-side')).display") == "block"
    await browser.send("click", selector="[data-action=details]")
    assert await browser.eval("getComputedStyle(document.querySelector('.jx-side')).display") == "none"


async def test_edge_labels_never_overlap_each_other_or_boxes(tmp_path: Path, browser: Browser) -> None:
    await _open(browser, tmp_path, layered(modules=8), 1400, 900)
    await browser.eval("window.__jaxlsp.expandAll()")
    await browser.wait("window.__jaxlsp.marks.fullLayouts >= 2")
    # Back to a readable zoom on the entry (expand-all keeps the view the user had).
    await browser.wait("document.querySelector('.jx-canvas').dataset.detail === '3'")
    rects = await browser.eval(RECTS)
    labels, boxes = rects["labels"], rects["boxes"]
    assert len(labels) >= 5, rects
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert not _overlap(a, b), (a, b)
        for b in boxes:
            assert not _overlap(a, b), (a, b)
    await browser.screenshot("labels-expanded.png")


async def test_a_new_graph_clears_the_old_selection(tmp_path: Path, browser: Browser) -> None:
    await browser.send("goto", url=webview_page(tmp_path))
    await browser.wait("window.posted.length")
    first = json.dumps(io.to_json(small_graph()))
    await browser.eval(f"window.postMessage({{type: 'graph', traceId: 't1', graph: {first}}}, '*')")
    await browser.wait("window.__jaxlsp.marks.firstFull")
    await browser.send("click", selector=".jx-op")
    await browser.wait("!!document.querySelector('.jx-selected') && !!document.querySelector('.jx-details h3')")
    second = json.dumps(io.to_json(layered(modules=3)))
    await browser.eval(f"window.postMessage({{type: 'graph', traceId: 't2', graph: {second}}}, '*')")
    await browser.wait("window.__jaxlsp.traceId === 't2' && window.__jaxlsp.marks.fullLayouts >= 2")
    assert await browser.eval("window.__jaxlsp.selected") is None
    assert await browser.eval("document.querySelector('.jx-selected')") is None
    assert await browser.eval("document.querySelector('.jx-details h3')") is None
    assert "Click a box" in await browser.eval("document.querySelector('.jx-details').textContent")
