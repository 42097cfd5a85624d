"""The viewer's overlays in headless Chromium (issue 18): boxes coloured by FLOPs and bytes, the
forward / backward split, precision, the memory peak, and the changes since a base graph, with
their figures in the details panel; in a static page (``jaxlsp diff --html``) and through the
language server's bridge (/analysis, /diff).

Graphs are real captures of ``tests/workspaces/costs`` (a Linen MLP's gradient, with costs).
Screenshots land in build/test-artifacts/viewer/.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.export import to_html
from jaxlsp.graph.model import Graph
from tests.server.conftest import JaxClient
from tests.viewer.conftest import Browser, trace_stack
from tests.worker.conftest import array, request

pytest.importorskip("jax")

COSTS = Path(__file__).resolve().parents[1] / "workspaces" / "costs"


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Graph, Graph]]:
    """The MLP's gradient with costs at hidden width 8 (the base) and 16."""
    from jaxlsp.worker.process.main import capture

    cache = tmp_path_factory.mktemp("cost-cache")
    path, cwd, modules = list(sys.path), os.getcwd(), set(sys.modules)
    out = []
    try:
        for hidden in (8, 16):
            init = {"kwargs": {"hidden": {"kind": "static", "value": hidden}}}
            req = request(
                "cost_models.py", "MLP", array(2, 3), workspace=COSTS, kind="linen", transform="grad", init=init
            )
            req["costs"] = {"cacheDir": str(cache)}
            result = capture(req)
            assert result["ok"], result.get("error")
            out.append(io.from_json(result["graph"]))
    finally:
        sys.path[:] = path
        os.chdir(cwd)
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(COSTS)):
                del sys.modules[name]
    yield out[0], out[1]


async def _overlay(browser: Browser, mode: str) -> None:
    await browser.eval(
        f"(() => {{ const s = document.querySelector('.jx-overlay'); s.value = '{mode}'; "
        "s.dispatchEvent(new Event('change')); })()"
    )
    await browser.wait(f"document.querySelector('.jx-canvas').dataset.overlay === '{mode}'")


async def _count(browser: Browser, selector: str) -> int:
    return int(await browser.eval(f"document.querySelectorAll({selector!r}).length"))


async def _open_all(browser: Browser) -> None:
    await browser.send("click", selector="[data-action=expand-all]")
    await browser.wait("window.__jaxlsp.marks.fullLayouts >= 2")


async def test_overlays_and_details_in_a_static_diff_page(
    graphs: tuple[Graph, Graph], browser: Browser, tmp_path: Path
) -> None:
    base, graph = graphs
    page = tmp_path / "diff.html"
    page.write_text(to_html(graph, base=base), encoding="utf-8")
    await browser.send("goto", url=page.as_uri())
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    # the values run's modes share the menu, listed only for a graph with statistics
    options = await browser.eval(
        "[...document.querySelectorAll('.jx-overlay option')].filter(o => !o.hidden).map(o => [o.value, o.disabled])"
    )
    assert options == [
        ["none", False],
        ["flops", False],
        ["bytes", False],
        ["time", True],  # not a timed trace
        ["precision", False],
        ["pass", False],
        ["memory", False],
        ["diff", False],
    ]
    banner = await browser.eval("document.querySelector('.jx-banner-diff').textContent")
    assert (
        banner.startswith("Changed since the previous trace: ")
        and "MLP/Dense_0 dot_general f32[2,8] \u2192 f32[2,16]" in banner
    )

    # FLOPs: every box with work is shaded, the heaviest most; badges give the figures
    await _overlay(browser, "flops")
    assert await _count(browser, ".jx-heat") > 0
    badges = await browser.eval("[...document.querySelectorAll('.jx-badge')].map(e => e.textContent)")
    assert badges and all(b.endswith("FLOP") for b in badges)
    await _open_all(browser)
    await _overlay(browser, "bytes")
    assert all(
        b.endswith("B")
        for b in await browser.eval("[...document.querySelectorAll('.jx-badge')].map(e => e.textContent)")
    )
    await browser.screenshot("overlay-bytes.png")

    # forward / backward: nodes coloured by pass; Dense_0's details put both side by side
    await _overlay(browser, "pass")
    assert await _count(browser, ".jx-ov-backward") > 0 and await _count(browser, ".jx-ov-forward") > 0
    await browser.eval(
        "window.__jaxlsp.goTo([...window.__jaxlsp.model.groups.values()].find(g => g.label === 'Dense_0').id)"
    )
    side = await browser.wait("document.querySelector('.jx-ov-details-forward-and-backward')?.textContent")
    assert "forward | backward" in side and "FLOPs" in side
    costs = await browser.eval("document.querySelector('.jx-ov-details-costs').textContent")
    assert "share" in costs and "% of the FLOPs" in costs
    await browser.screenshot("overlay-pass.png")

    # precision: the products are marked, with their operand types and precision in the details
    await _overlay(browser, "precision")
    assert await _count(browser, ".jx-ov-product") >= 2
    dot = await browser.eval("[...window.__jaxlsp.model.nodes.values()].find(n => n.primitive === 'dot_general').id")
    await browser.eval(f"window.__jaxlsp.goTo({dot!r})")
    text = await browser.wait("document.querySelector('.jx-ov-details-precision')?.textContent")
    assert "f32 x f32 -> f32, precision DEFAULT" in text
    node_costs = await browser.eval("document.querySelector('.jx-ov-details-costs').textContent")
    assert "FLOPs" in node_costs and "transcendentals" in node_costs

    # memory: the node running at the peak is marked and says so
    await _overlay(browser, "memory")
    assert await _count(browser, ".jx-ov-peak") + await _count(browser, ".jx-ov-peak-in") >= 1
    peak = await browser.eval("document.querySelector('.jx-ov-peak .jx-badge, .jx-ov-peak-in .jx-badge')?.textContent")
    assert peak and peak.startswith("peak ")

    # changes: the widened layer's nodes are marked changed, the banner lists what was removed
    await _overlay(browser, "diff")
    assert await _count(browser, ".jx-ov-changed") > 0
    changed = await browser.eval("document.querySelector('.jx-ov-changed').dataset.id")
    await browser.eval(f"window.__jaxlsp.goTo({changed!r})")
    text = await browser.wait("document.querySelector('.jx-ov-details-changes')?.textContent")
    assert "\u2192" in text
    await browser.screenshot("overlay-diff.png")
    svg = await browser.eval("window.__jaxlsp.svgText()")
    assert "jx-ov-changed" in svg and "--changed" not in svg  # colours written in


async def test_modes_without_data_are_disabled(browser: Browser, tmp_path: Path) -> None:
    from tests.graph.test_samples import small_graph

    page = tmp_path / "plain.html"
    page.write_text(to_html(small_graph()), encoding="utf-8")
    await browser.send("goto", url=page.as_uri())
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    disabled = await browser.eval(
        "Object.fromEntries([...document.querySelectorAll('.jx-overlay option')].map(o => [o.value, o.disabled]))"
    )
    # no costs, no gradient, no base graph; memory and precision need no trace option
    assert disabled == {
        "none": False,
        "flops": True,
        "bytes": True,
        "time": True,
        "precision": False,
        "pass": True,
        "memory": False,
        "diff": True,
        "absmax": True,  # a values run's modes: hidden and disabled without statistics
        "std": True,
        "nonfinite": True,
        "grad": True,
    }
    hidden = await browser.eval("[...document.querySelectorAll('.jx-overlay option')].filter(o => o.hidden).length")
    assert hidden == 4
    await browser.eval("window.__jaxlsp.setOverlay('flops')")
    assert await browser.eval("document.querySelector('.jx-canvas').dataset.overlay") == "none"
    assert "trace it with costs" in await browser.eval("window.__jaxlsp.status")
    assert not await browser.eval("!!document.querySelector('.jx-banner-diff')")


async def test_the_bridge_serves_analysis_and_changes(traced: JaxClient, browser: Browser) -> None:
    client = traced
    first = await trace_stack(client)
    model = client.workspace / "model.py"
    model.write_text(model.read_text().replace("nn.Dense(8)", "nn.Dense(16)"))
    second = await trace_stack(client)
    assert second != first
    result = await client.request("jaxlsp/openGraph", {"traceId": second})
    await browser.send("goto", url=result["url"])
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    banner = await browser.wait("document.querySelector('.jx-banner-diff')?.textContent")
    assert "Changed since the previous trace" in banner and "f32[2,16]" in banner
    await browser.send("click", selector=".jx-banner-diff [data-action=show-changes]")
    await browser.wait("document.querySelector('.jx-canvas').dataset.overlay === 'diff'")
    assert await _count(browser, ".jx-ov-changes-in") + await _count(browser, ".jx-ov-changed") > 0
    await _overlay(browser, "memory")  # the bridge's /analysis: the peak is known
    assert await browser.eval("window.__jaxlsp.overlay.analysis.memory.peakBytes") > 0
    disabled = await browser.eval("document.querySelector('.jx-overlay option[value=flops]').disabled")
    assert disabled is True  # traced without costs
