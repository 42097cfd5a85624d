"""The result pipe's framing: ``#phase`` and ``#learned`` lines, then one JSON result, however the bytes
arrive."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from jaxlsp.capture.launch.supervise import _ResultSink

STREAM = b'#phase import\n#phase trace\n#phase build\n{"ok": true, "graph": {"note": "#phase not"}}'


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=8))
def test_phases_and_result_survive_any_chunking(cuts: list[int]) -> None:
    heard: list[str] = []
    sink = _ResultSink(on_phase=heard.append)
    edges = [0, *sorted(cuts), len(STREAM)]
    for start, end in itertools.pairwise(edges):
        sink(STREAM[start:end])
    assert heard == ["import", "trace", "build"]
    assert bytes(sink.data) == b'{"ok": true, "graph": {"note": "#phase not"}}' and not sink.preamble


def test_a_half_phase_line_is_no_result() -> None:
    sink = _ResultSink()
    sink(b"#phase imp")
    assert sink.preamble and bytes(sink.data) == b"#phase imp"


def test_a_failing_callback_loses_nothing() -> None:
    def boom(phase: str) -> None:
        raise RuntimeError(phase)

    sink = _ResultSink(on_phase=boom)
    sink(b'#phase import\n{"ok": false}')
    assert bytes(sink.data) == b'{"ok": false}'


LEARNED = (
    b'#phase run\n#learned [{"path": "/w/m.py", "name": "f"}]\n#learned [{"path": "/w/m.py", "name": "g"}, 3]\n'
    b'{"ok": true, "signatures": []}'
)


@given(st.lists(st.integers(min_value=0, max_value=len(LEARNED)), max_size=8))
def test_learned_records_arrive_in_order_before_the_result_however_cut(cuts: list[int]) -> None:
    heard: list[list[dict[str, object]]] = []
    phases: list[str] = []
    sink = _ResultSink(on_phase=phases.append, on_learned=heard.append)
    edges = [0, *sorted(cuts), len(LEARNED)]
    for start, end in itertools.pairwise(edges):
        sink(LEARNED[start:end])
    assert phases == ["run"]
    assert heard == [[{"path": "/w/m.py", "name": "f"}], [{"path": "/w/m.py", "name": "g"}]]  # not the 3
    assert bytes(sink.data) == b'{"ok": true, "signatures": []}' and not sink.preamble


def test_a_learned_line_that_is_not_json_is_passed_over() -> None:
    heard: list[list[dict[str, object]]] = []
    sink = _ResultSink(on_learned=heard.append)
    sink(b'#learned [{"path": \n#learned [{"name": "f"}]\n{"ok": true}')
    assert heard == [[{"name": "f"}]] and bytes(sink.data) == b'{"ok": true}'
