"""JSON in slices (``jaxlsp.graph.slices``) is exactly ``json``'s text and objects, and the
collector's pause holds while any thread still needs it (``jaxlsp.graph.collector``)."""

from __future__ import annotations

import gc
import json
import threading

import pytest

from jaxlsp.graph import collector, io, slices
from tests.robustness.test_load import synthetic_graph

SAMPLES = [
    {"a": [1, 2.5, None, True], "é": "ü\u2028<", "n": {"x": [], "y": {}}},
    [{"k": [[1], [2, [3]]]}, "s", -0.0, 10**30],
    {1: "non-string keys are left to json", "b": (1, 2)},
    "plain",
    [],
    {},
]


@pytest.mark.parametrize("ensure_ascii", [False, True])
@pytest.mark.parametrize("depth", [0, 1, 2, 3, 5])
def test_dumps_is_json_dumps(depth: int, ensure_ascii: bool) -> None:
    for sample in SAMPLES:
        expected = json.dumps(sample, separators=(",", ":"), ensure_ascii=ensure_ascii, allow_nan=False)
        assert slices.dumps(sample, ensure_ascii=ensure_ascii, depth=depth) == expected
    with pytest.raises(ValueError):
        slices.dumps({"x": [float("nan")]}, depth=1)


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 5])
def test_loads_is_json_loads(depth: int) -> None:
    for sample in SAMPLES:
        for text in (json.dumps(sample), json.dumps(sample, indent=2), " \n" + json.dumps(sample) + "\t\r\n"):
            assert slices.loads(text, depth) == json.loads(text)
    assert slices.loads(b'{"a": [1, {"b": "\xc3\xbc"}]}', depth) == {"a": [1, {"b": "ü"}]}
    for bad in ('{"a": 1,}', '{"a" 1}', "[1 2]", '{"a": 1} x', "[", "{1: 2}", ""):
        with pytest.raises(json.JSONDecodeError):
            slices.loads(bad, depth)


def test_a_graph_round_trips_in_slices() -> None:
    graph = synthetic_graph(300)
    graph.versions = dict.fromkeys(io.VERSION_KEYS, "0")
    assert io.dumps(graph, sliced=True) == io.dumps(graph)
    assert io.loads(io.dumps(graph), sliced=True) == graph


def test_the_collector_stays_paused_until_the_last_thread_is_done() -> None:
    assert gc.isenabled()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector.paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with collector.paused():
            second_in.set()
            first_out.wait(10)
            seen.append(gc.isenabled())  # the first thread's pause ended, this one's has not

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == [False]
    assert gc.isenabled()
