"""Measured time on a hand-made graph: a fusion's time split by FLOPs, lines and modules rolled up,
the table's rows adding up, the hover line, and the optional ``time`` section in the file (issue 28)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from jaxlsp.graph import io, timing
from jaxlsp.graph.model import Graph
from jaxlsp.graph.validate import load_schema
from tests.graph.test_costs import measured_graph

VALIDATOR = Draft202012Validator(load_schema())


def timed(graph: Graph | None = None) -> Graph:
    """``measured_graph`` (n0 dot 10 FLOPs, n1 add 2, n3 max 1, n4 mul 3, n6 tanh 0 FLOPs / 40 bytes)
    timed: a fusion of the Dense layer's dot and add (12 ms), the jit(relu) call and its max (1 ms),
    the mul (2 ms), the tanh in the scan (3 ms) and a copy no equation names (0.5 ms)."""
    graph = graph or measured_graph()
    ops = [
        timing.Op("ynn_fusion", "fusion", 0.012, 5, ["n0", "n1"]),
        timing.Op("maximum.1", "maximum", 0.001, 5, ["n2", "n3"]),
        timing.Op("multiply", "multiply", 0.002, 5, ["n4"]),
        timing.Op("tanh", "tanh", 0.003, 60, ["n6"]),
        timing.Op("copy.3", "copy", 0.0005, 5, []),
    ]
    graph.time = timing.section(
        graph,
        ops,
        step=0.020,
        steps=[0.019, 0.021, 0.020, 0.020, 0.020],
        busy=0.0185,
        compile_seconds=0.4,
        repeat=5,
        warmup=1,
        device="cpu",
        devices=1,
        timeline="host",
        notes=[],
    )
    return graph


def test_a_fusion_splits_its_time_over_its_nodes_by_flops() -> None:
    time = timed().time
    assert time is not None
    nodes = time["nodes"]
    assert nodes["n0"] == pytest.approx(0.012 * 10 / 12) and nodes["n1"] == pytest.approx(0.012 * 2 / 12)
    # The call node beside its body's max gets none: its figures are its body's.
    assert "n2" not in nodes and nodes["n3"] == pytest.approx(0.001)
    assert nodes["n6"] == pytest.approx(0.003)  # alone in its op (no FLOPs: it would split by bytes)
    assert time["attributed"] == pytest.approx(0.018) and time["busy"] == 0.0185
    assert time["ops"][0]["name"] == "ynn_fusion" and time["ops"][-1] == {
        "name": "copy.3",
        "opcode": "copy",
        "seconds": 0.0005,
        "count": 5,
        "nodes": [],
    }
    assert timing.SPLIT_NOTE in time["notes"]


def test_without_flops_an_op_splits_by_bytes_then_evenly() -> None:
    graph = measured_graph()
    by_id = {n.id: n for n in graph.nodes}
    # n6 has no FLOPs but 40 bytes; n3 one FLOP: FLOPs win when any node has them.
    assert timing.weights([by_id["n6"], by_id["n3"]]) == [0.0, 1.0]
    assert timing.weights([by_id["n6"], by_id["n4"]]) == [0.0, 3.0]
    assert timing.weights([by_id["n6"]]) == [40.0]  # no FLOPs at all: bytes
    for n in graph.nodes:
        n.costs = None
    assert timing.weights([by_id["n0"], by_id["n1"]]) == [1.0, 1.0]


def test_lines_and_modules_roll_up_the_nodes() -> None:
    time = timed().time
    assert time is not None
    lines = {(x["path"], x["line"]): x["seconds"] for x in time["lines"]}
    assert lines[("model.py", 5)] == pytest.approx(0.012)  # n0 and n1 (n3 has no source)
    assert lines[("model.py", 7)] == pytest.approx(0.002)
    modules = {m["module"]: m["seconds"] for m in time["modules"]}
    assert modules["Model/Dense_0"] == pytest.approx(0.012)
    assert modules["Model"] == pytest.approx(0.012 + 0.002 + 0.003)  # its submodule's and its own
    assert modules[""] == pytest.approx(0.001)  # the relu's max outside every module
    assert time["modules"][0]["module"] == "Model"


def test_the_table_rows_add_up_to_the_busy_time() -> None:
    time = timed().time
    assert time is not None
    rows = timing.rows(time)
    labels = [r.label for r in rows]
    # The one top module holds the rest: its children are the rows, its own ops one more.
    assert labels == ["Model/Dense_0", "Model (its own ops)", timing.OUTSIDE, timing.UNATTRIBUTED, timing.IDLE]
    assert sum(r.seconds for r in rows[:-1]) == pytest.approx(time["busy"])
    assert sum(r.seconds for r in rows) == pytest.approx(time["step"])  # and the idle part to the step
    text = timing.render(time)
    lines = text.splitlines()
    assert lines[0].startswith("time: step 20.0 ms (wall clock, mean of 5 runs after a warm-up; compiled in 400.0 ms)")
    assert "device busy 18.5 ms (92 % of the step), 97 % of it attributed" in lines[0]
    assert lines[1].split() == ["module", "time", "share"]
    assert lines[2].split() == ["Model/Dense_0", "12.0", "ms", "60", "%"]
    total = next(line for line in lines if line.startswith("total"))
    assert total.split() == ["total", "20.0", "ms", "100", "%"]
    assert any(line.split()[:6] == ["(idle:", "no", "op", "running)", "1.5", "ms"] for line in lines)
    assert any(line.startswith("not attributed: copy.3 500 µs") for line in lines)
    assert any(line.startswith("note: a fusion's time") for line in lines)


def test_the_hover_line_gives_time_and_share_of_the_step() -> None:
    time = timed().time
    assert timing.hover_line(time, ["n0", "n1"]) == "time: 12.0 ms · 60 % of the step (measured, 5 runs)"
    assert timing.hover_line(time, ["n2"]) is None  # nothing measured there
    assert timing.hover_line(None, ["n0"]) is None
    assert [op["name"] for op in timing.instructions_of(time, "n3")] == ["maximum.1"]


def test_the_time_section_round_trips_and_validates() -> None:
    graph = timed()
    data = io.to_json(graph)
    assert list(VALIDATOR.iter_errors(data)) == []
    back = io.from_json(data)
    assert back.time == graph.time
    untimed = io.to_json(measured_graph())
    assert "time" not in untimed  # optional: graphs without it are unchanged


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("step", -1.0, "time.step: expected seconds"),
        ("repeat", 0, "time.repeat: expected an integer >= 1"),
        ("nodes", [], "time.nodes: expected an object"),
        ("ops", [{"name": "x", "opcode": "", "seconds": 1.0, "count": 1}], "time.ops[0]: missing key 'nodes'"),
        ("lines", [{"path": "m.py", "line": 3, "seconds": "1"}], "time.lines[0].seconds: expected seconds"),
        ("extra", 1, "time.extra: unknown key"),
    ],
)
def test_a_malformed_time_section_names_the_key_path(where: str, value: Any, message: str) -> None:
    data = io.to_json(timed())
    bad = copy.deepcopy(data)
    bad["time"][where] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        io.from_json(bad)
    assert list(VALIDATOR.iter_errors(bad)), f"the schema accepts time.{where} = {value!r}"


def tpu_timed() -> dict[str, Any]:
    """``timed``'s ops on a TPU-like step: 18.5 ms of device work in a 200 ms step (the chip is
    mostly idle for a small model, issue 55.2)."""
    graph = timed()
    assert graph.time is not None
    time = copy.deepcopy(graph.time)
    time.update(platform="tpu", device="tpu", timeline="device", step=0.200, steps=[0.2] * 5)
    time["lines"] = list(reversed(time["lines"]))  # the table sorts them itself
    return time


def test_on_a_tpu_rows_read_as_shares_of_device_busy_time_first_and_idle_is_its_own_row() -> None:
    time = tpu_timed()
    lines = timing.render(time).splitlines()
    assert "device busy 18.5 ms (9 % of the step)" in lines[0]
    assert lines[1].split() == ["module", "time", "of", "busy", "of", "step"]
    assert lines[2].split() == ["Model/Dense_0", "12.0", "ms", "65", "%", "6", "%"]  # 12 of 18.5 busy, 12 of 200
    idle = next(line for line in lines if line.startswith(timing.IDLE))
    assert idle.split()[-5:] == ["181.5", "ms", "-", "91", "%"]
    total = next(line for line in lines if line.startswith("total"))
    assert total.split() == ["total", "200.0", "ms", "-", "100", "%"]
    # the per-line table: by device time, largest first, the same two shares
    head = lines.index(next(line for line in lines if line.startswith("line ")))
    assert lines[head].split() == ["line", "time", "of", "busy", "of", "step"]
    seconds = [float(e["seconds"]) for e in time["lines"]]
    first = lines[head + 1].split()
    assert first[1:3] == timing.duration(max(seconds)).split() and first[3:5] == ["65", "%"]
    shown = [line.split()[1] + " " + line.split()[2] for line in lines[head + 1 : head + 1 + len(seconds)]]
    assert shown == [timing.duration(s) for s in sorted(seconds, reverse=True)]
    assert timing.hover_line(time, ["n0", "n1"]) == (
        "time: 12.0 ms · 65 % of device busy time, 6 % of the step (measured, 5 runs)"
    )


def test_the_cpu_keeps_shares_of_the_step() -> None:
    time = timed().time
    assert time is not None and not timing.device_view(time)
    assert timing.render(time).splitlines()[1].split() == ["module", "time", "share"]
    assert timing.hover_line(time, ["n0", "n1"]) == "time: 12.0 ms · 60 % of the step (measured, 5 runs)"
