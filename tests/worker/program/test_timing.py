"""Timed captures in the worker (issue 28): a scan's loop body timed op by op inside XLA's while
loop and attributed to the body's equations, every figure per step, and inputs that are only
shapes refused with a sentence."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, request

pytest.importorskip("jax")

TIMING = Path(__file__).resolve().parents[2] / "workspaces" / "timing"


@pytest.fixture
def timed(run_capture: Callable[[dict[str, Any]], dict[str, Any]], tmp_path: Path) -> Iterator[Callable[..., Any]]:
    def run(name: str, *args: Any, repeat: int = 3, **profile: Any) -> dict[str, Any]:
        req = request("timed_models.py", name, *args, workspace=TIMING, **profile)
        req["costs"] = {"cacheDir": str(tmp_path / "costs")}
        req["time"] = {"repeat": repeat}
        return run_capture(req)

    yield run
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(TIMING)):
            del sys.modules[name]


def test_a_scan_body_is_timed_inside_the_while_loop(timed: Callable[..., Any]) -> None:
    result = timed("scanned", array(256, 256), array(128, 256), repeat=4)
    assert result["ok"], result.get("error")
    graph = result["graph"]
    time = graph["time"]
    assert time["repeat"] == 4 and len(time["steps"]) == 4 and time["devices"] == 1
    assert time["timeline"] == "host" and time["platform"] == "cpu"
    # Every op with a source is attributed; what is left are XLA's own copies, whose share of a
    # 1 ms step swings with the machine's load (4-14 % on a busy CI), so the test names them
    # rather than bounding a ratio.
    sourced = sum(op["seconds"] for op in time["ops"] if op["nodes"])
    assert 0 < time["attributed"] == pytest.approx(sourced, rel=1e-6)
    assert {op["opcode"] for op in time["ops"] if not op["nodes"]} <= {"copy", "copy-start", "copy-done"}
    assert sum(op["seconds"] for op in time["ops"]) == pytest.approx(time["busy"], rel=1e-6)
    by_id = {n["id"]: n for n in graph["nodes"]}
    scan = next(n for n in graph["nodes"] if n["primitive"] == "scan")
    body = {g["id"] for g in graph["groups"] if g["node"] == scan["id"]}
    inside = {nid for nid, n in by_id.items() if n["group"] in body}
    loop = [op for op in time["ops"] if op["opcode"] == "while"]
    assert loop, [op["name"] for op in time["ops"]]
    # The body's product ran 8 times a step, each run its own event, and is its equations' time.
    products = [op for op in time["ops"] if set(op["nodes"]) & inside and op["count"] >= 8 * 4]
    assert products, time["ops"]
    body_seconds = sum(s for nid, s in time["nodes"].items() if nid in inside)
    assert body_seconds > loop[0]["seconds"]  # the while's own time is only its overhead
    lines = {x["line"]: x["seconds"] for x in time["lines"]}
    matmul_line = next(n["source"]["line"] for n in graph["nodes"] if n["primitive"] == "dot_general")
    assert max(lines, key=lambda k: lines[k]) == matmul_line
    assert time["phases"].keys() == {"compile", "warmup", "profiled", "read", "attribute"}


def test_inputs_that_are_only_shapes_are_refused(timed: Callable[..., Any]) -> None:
    result = timed("scanned", inputs={"factory": "timed_models:abstract_inputs"})
    assert not result["ok"]
    assert result["error"]["kind"] == "refused"
    assert "inputs are only shapes" in result["error"]["message"]


def test_the_converts_xla_inserts_count_with_the_equations_whose_values_they_move(timed: Callable[..., Any]) -> None:
    # Issue 47: the CPU computes a bf16 dot in f32, so XLA converts each input up and the result
    # down in ``wrapped_convert`` fusions that carry no metadata; they were "not attributed"
    # (21 % of the step). Each now takes the nodes of the dot that reads the input it converts
    # (or whose result it converts), and the function's time reads by line.
    bf16 = "bfloat16"
    result = timed(
        "bf16_mlp", array(256, 512, dtype=bf16), array(512, 512, dtype=bf16), array(512, 256, dtype=bf16),
        array(256, 256, dtype=bf16), repeat=3,
    )  # fmt: skip
    assert result["ok"], result.get("error")
    graph = result["graph"]
    time = graph["time"]
    converts = [op for op in time["ops"] if op["name"].startswith("wrapped_convert")]
    assert len(converts) == 5, [op["name"] for op in time["ops"]]  # four inputs up, the result down
    by_id = {n["id"]: n for n in graph["nodes"]}
    for op in converts:
        assert op["nodes"] and op["via"], op
        assert {by_id[i]["primitive"] for i in op["nodes"]} == {"dot_general"}, op
    assert not [op for op in time["ops"] if not op["nodes"]]
    assert time["attributed"] >= 0.95 * time["busy"]
    assert any("convert or copy a value" in n for n in time["notes"])
    dots = sorted(n["source"]["line"] for n in graph["nodes"] if n["primitive"] == "dot_general")
    assert {x["line"] for x in time["lines"]} == set(dots)  # the relus share their dots' lines
