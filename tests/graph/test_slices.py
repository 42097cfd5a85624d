"""JSON in slices (``jaxlsp.graph.slices``) is exactly ``json``'s text and objects, and the
collector's pause holds while any thread still needs it (``jaxlsp.graph.collector``)."""

from __future__ import annotations

import gc
import json
import threading

import pytest

from jaxlsp.graph import collector, io, slices
from jaxlsp.graph.model import VERSION_KEYS
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
    graph.versions = dict.fromkeys(VERSION_KEYS, "0")
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


class _Noted:
    """An item that notes, as it is freed, how many items its list still holds."""

    def __init__(self, holder: list[object], seen: list[int]) -> None:
        self.holder = holder
        self.seen = seen

    def __del__(self) -> None:
        self.seen.append(len(self.holder))


def test_release_lets_go_of_a_big_structure_a_piece_at_a_time() -> None:
    """Freed at once, a 60,000-equation graph's JSON held the GIL 0.3-0.5 s in the thread that
    let go of it (issue 25: export, GET /graph, a file diff): ``release`` frees ``PIECE`` items at a
    time, and only the lists ``value`` holds itself, so items others still use live on."""
    from jaxlsp.graph.slices import PIECE, release

    seen: list[int] = []
    nodes: list[object] = []
    nodes.extend(_Noted(nodes, seen) for _ in range(PIECE * 4))
    shared = {"params": [1, 2, 3]}
    values = [shared] * 10
    data = {"nodes": nodes, "values": values, "format": "jaxlsp.graph"}
    del nodes
    release(data)
    assert data["nodes"] == [] and data["values"] == [] and data["format"] == "jaxlsp.graph"
    assert len(seen) == PIECE * 4
    # Freed in four pieces: the first PIECE while 3 * PIECE were still held, and so on.
    assert sorted(set(seen), reverse=True) == [PIECE * 3, PIECE * 2, PIECE, 0]
    assert shared == {"params": [1, 2, 3]}  # an item's own lists are never emptied
    release([1, 2, 3])  # a list itself; a value with no lists: nothing to do
    release(3)
