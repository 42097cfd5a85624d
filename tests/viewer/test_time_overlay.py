"""The viewer's measured-time overlay in headless Chromium (issue 28): boxes coloured by their
measured time with time and share as badges, and a node's HLO instructions in the details pane.

The graph is a real timed capture of ``tests/workspaces/timing`` (a 4-layer MLP, the second layer
much the widest). Screenshots land in build/test-artifacts/viewer/.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.export import to_html
from jaxlsp.graph.model import Graph
from tests.viewer.conftest import Browser
from tests.worker.conftest import array, request

pytest.importorskip("jax")

TIMING = Path(__file__).resolve().parents[1] / "workspaces" / "timing"


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graph]:
    from jaxlsp.worker.process.main import capture

    path, cwd, modules = list(sys.path), os.getcwd(), set(sys.modules)
    try:
        req = request("timed_models.py", "MLP", array(256, 256), workspace=TIMING, kind="linen")
        req["costs"] = {"cacheDir": str(tmp_path_factory.mktemp("cost-cache"))}
        req["time"] = {"repeat": 2}
        result = capture(req)
        assert result["ok"], result.get("error")
        yield io.from_json(result["graph"])
    finally:
        sys.path[:] = path
        os.chdir(cwd)
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(TIMING)):
                del sys.modules[name]


async def test_the_time_overlay_colours_by_measured_time_and_lists_hlo_instructions(
    timed: Graph, browser: Browser, tmp_path: Path
) -> None:
    page = tmp_path / "timed.html"
    page.write_text(to_html(timed), encoding="utf-8")
    await browser.send("goto", url=page.as_uri())
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    disabled = await browser.eval("document.querySelector('.jx-overlay option[value=time]').disabled")
    assert disabled is False
    await browser.eval(
        "(() => { const s = document.querySelector('.jx-overlay'); s.value = 'time'; "
        "s.dispatchEvent(new Event('change')); })()"
    )
    await browser.wait("document.querySelector('.jx-canvas').dataset.overlay === 'time'")
    await browser.send("click", selector="[data-action=expand-all]")
    await browser.wait("window.__jaxlsp.marks.fullLayouts >= 2")
    assert int(await browser.eval("document.querySelectorAll('.jx-heat').length")) > 0
    badges = await browser.eval("[...document.querySelectorAll('.jx-badge')].map(e => e.textContent)")
    assert badges and all(" \u00b7 " in b and b.endswith("%") for b in badges), badges
    await browser.screenshot("overlay-time.png")

    # The widest layer's product: its time, its share, and the fused kernel XLA ran it in.
    dense = next(n for n in timed.nodes if n.primitive == "dot_general" and n.scope.endswith("Dense_1"))
    await browser.eval(f"window.__jaxlsp.goTo({dense.id!r})")
    text = await browser.wait("document.querySelector('.jx-ov-details-measured-time')?.textContent")
    assert "per step" in text and "% of the step" in text
    hlo = await browser.wait("document.querySelector('.jx-ov-details-HLO-instructions')?.textContent")
    assert timed.time is not None
    names = [op["name"] for op in timed.time["ops"] if dense.id in op["nodes"]]
    assert names and all(name in hlo for name in names), (names, hlo)


async def test_on_an_accelerator_shares_read_of_device_busy_time_first(
    timed: Graph, browser: Browser, tmp_path: Path
) -> None:
    """As the CLI's tables (issue 55.2): on a TPU the step is mostly idle for a small model, so a
    box's share is of device-busy time first, the step's beside it. The CPU capture's time section
    is given a TPU's platform and a busy time a tenth of its step (no chip here to measure one)."""
    assert timed.time is not None
    time = {**timed.time, "platform": "tpu", "busy": timed.time["step"] / 10}
    on_chip = dataclasses.replace(timed, time=time)
    page = tmp_path / "on-chip.html"
    page.write_text(to_html(on_chip), encoding="utf-8")
    await browser.send("goto", url=page.as_uri())
    await browser.wait("window.__jaxlsp && window.__jaxlsp.marks.firstFull")
    dense = next(n for n in timed.nodes if n.primitive == "dot_general" and n.scope.endswith("Dense_1"))
    await browser.eval(
        "(() => { const s = document.querySelector('.jx-overlay'); s.value = 'time'; "
        "s.dispatchEvent(new Event('change')); })()"
    )
    await browser.eval(f"window.__jaxlsp.goTo({dense.id!r})")
    text = await browser.wait("document.querySelector('.jx-ov-details-measured-time')?.textContent")
    seconds = sum(s for n, s in time["nodes"].items() if n == dense.id)
    busy_share = round(100 * seconds / time["busy"])
    step_share = round(100 * seconds / time["step"])
    assert f"{busy_share} % of device-busy time" in text and f"{step_share} % of the step" in text, text
    assert text.index("of device-busy time") < text.index("of the step"), text
