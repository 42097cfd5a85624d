"""The viewer on a values run's graph, in headless Chromium (issue 17): the first non-finite value's
banner and its node, statistics and a histogram in the details, overlays that colour boxes by
|x| max, std and NaN/Inf counts, and boxes that never ran (a cond branch not taken).

The graphs come from real values runs of ``tests/workspaces/values`` (the worker, in this
process); the pages are their static exports.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.export import to_html
from tests.viewer.conftest import Browser
from tests.worker.conftest import array, request

VALUES = Path(__file__).resolve().parents[1] / "workspaces" / "values"


@pytest.fixture(scope="module")
def graphs() -> Iterator[dict[str, Any]]:
    """Values runs of ``blowup`` (a NaN in a scan's seventh iteration) and ``branchy`` (a cond)."""
    from jaxlsp.worker.process.main import capture

    path, cwd, modules = list(sys.path), os.getcwd(), set(sys.modules)
    out: dict[str, Any] = {}
    for name, arg in (
        ("blowup", {**array(4), "generator": {"kind": "full", "value": 6.0}}),
        ("branchy", {**array(3), "generator": {"kind": "full", "value": 0.5}}),
    ):
        req = request("values_targets.py", name, arg, workspace=VALUES)
        req["values"] = {}
        result = capture(req)
        assert result["ok"], result.get("error")
        out[name] = io.from_json(result["graph"])
    sys.path[:] = path
    os.chdir(cwd)
    for module in set(sys.modules) - modules:
        if str(getattr(sys.modules.get(module), "__file__", "") or "").startswith(str(VALUES)):
            del sys.modules[module]
    yield out


async def _open(browser: Browser, tmp_path: Path, graph: Any) -> None:
    page = tmp_path / "values.html"
    page.write_text(to_html(graph), encoding="utf-8")
    assert await browser.send("goto", url=page.as_uri()) == 200
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")


async def _overlay(browser: Browser, mode: str) -> None:
    select = "document.querySelector('.jx-overlay')"
    await browser.eval(f"(() => {{ {select}.value = '{mode}'; {select}.dispatchEvent(new Event('change')); }})()")


async def test_the_first_nan_its_statistics_and_the_overlays(
    tmp_path: Path, browser: Browser, graphs: dict[str, Any]
) -> None:
    graph = graphs["blowup"]
    first = graph.execution["firstNonFinite"]
    await _open(browser, tmp_path, graph)
    # the statistics' modes join the costs' in the one overlay menu; no gradient profile, no "grad"
    shown = await browser.eval(
        "[...document.querySelectorAll('.jx-overlay option')].filter(o => !o.hidden).map(o => o.value)"
    )
    assert shown[-3:] == ["absmax", "std", "nonfinite"] and "grad" not in shown and shown[0] == "none"
    banner = await browser.eval("document.querySelector('.jx-banner-nonfinite').textContent")
    assert banner.startswith(first["message"])
    # "Show" opens the scan around the sqrt, selects it and shows its statistics.
    await browser.send("click", selector=".jx-banner-nonfinite .jx-button")
    assert await browser.wait("window.__jaxlsp.selected") == first["node"]
    details = await browser.eval("document.querySelector('.jx-details').textContent")
    assert "NaN / +Inf / -Inf12 / 0 / 0" in details and "over 9 iterations" in details
    assert "first non-finiteiteration 7" in details
    bars = await browser.eval(
        "[...document.querySelectorAll('.jx-details .jx-stats')[0].querySelectorAll('.jx-hist rect')].map(r => +r.dataset.count)"
    )
    assert len(bars) == 32 and sum(bars) == 6 * 4  # the finite square roots of iterations 1 to 6
    await browser.screenshot("values-details.png")

    box = f"document.querySelector('g[data-id=\"{first['node']}\"]')"
    await _overlay(browser, "nonfinite")
    assert await browser.wait(f"{box} && {box}.dataset.overlay") == "12"
    fill = await browser.eval(f"getComputedStyle({box}.querySelector('.jx-box')).fill")
    assert fill == "rgb(238, 43, 43)", fill  # hsl(0, 85%, 55%): some NaN
    status = await browser.eval("document.querySelector('.jx-status').textContent")
    assert status.startswith("overlay NaN / Inf count: ") and "non-finite elements in all" in status

    await _overlay(browser, "absmax")
    assert float(await browser.wait(f"{box}.dataset.overlay")) == pytest.approx(math.sqrt(5), rel=1e-6)
    await _overlay(browser, "std")
    values = {v.id: v for v in graph.values}
    assert float(await browser.wait(f"{box}.dataset.overlay")) == pytest.approx(values[first["value"]].stats["std"])
    painted = await browser.eval("document.querySelectorAll('g.jx-node[data-overlay]').length")
    assert painted >= 3
    await browser.screenshot("values-overlay-std.png")
    await _overlay(browser, "none")
    assert await browser.eval("document.querySelectorAll('g.jx-node[data-overlay]').length") == 0


async def test_a_branch_not_taken_is_drawn_as_never_run(
    tmp_path: Path, browser: Browser, graphs: dict[str, Any]
) -> None:
    graph = graphs["branchy"]
    await _open(browser, tmp_path, graph)
    branches = {g.label: g.id for g in graph.groups if g.kind == "cond_branch"}
    sin = next(n.id for n in graph.nodes if n.primitive == "sin")  # branch 0: not taken
    exp = next(n.id for n in graph.nodes if n.primitive == "exp")  # branch 1: taken
    await browser.eval(f"window.__jaxlsp.goTo('{sin}')")
    await browser.eval(f"window.__jaxlsp.goTo('{exp}')")
    classes = await browser.eval(
        "Object.fromEntries([...document.querySelectorAll('g.jx-item')].map(g => [g.dataset.id, g.classList.contains('jx-unrun')]))"
    )
    assert classes[sin] is True and classes[exp] is False
    assert classes.get(branches["branch 0"]) is True and classes.get(branches["branch 1"]) is False
    await browser.eval(f"window.__jaxlsp.goTo('{sin}')")
    assert "never ran" in await browser.eval("document.querySelector('.jx-details').textContent")
    # No banner: nothing went non-finite, and the replay agreed.
    assert await browser.eval("document.querySelector('.jx-banner-nonfinite, .jx-banner-mismatch')") is None
