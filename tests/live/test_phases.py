"""Where a live trace's time went (jaxlsp/capture/phases.py): spans between marks, the traced
child's own phases in the span that ended with its result, and every moment counted once."""

from __future__ import annotations

from jaxlsp.capture.phases import Phases, summary


def test_the_result_span_is_split_by_the_childs_clock_and_phases() -> None:
    timing = Phases(saved=100.0)
    timing.mark("discover", 100.01)
    timing.mark("wait", 100.02)
    timing.mark("fork", 100.05)
    timing.took({"import": 0.1, "trace": 0.5, "build": 0.1}, {"forked": 100.04, "done": 100.8})
    timing.mark("result", 100.9)
    timing.mark("store", 101.0)
    spans = timing.spans()
    names = [name for name, _ in spans]
    assert names == [
        "discover", "wait", "fork", "child start", "import", "make_jaxpr", "build", "worker other", "to server", "store"
    ]  # fmt: skip
    values = dict(spans)
    assert values["child start"] == 0.0  # the child began before the server heard of the fork
    assert abs(values["worker other"] - 0.05) < 1e-9 and abs(values["to server"] - 0.1) < 1e-9
    assert abs(sum(values.values()) - timing.total()) < 1e-9 and abs(timing.total() - 1.0) < 1e-9
    assert summary("f", "fresh", timing).startswith("live f fresh in 1.000 s: discover 0.010 \u00b7 wait 0.010")


def test_without_the_childs_clock_the_result_span_stays_whole() -> None:
    timing = Phases(saved=0.0)
    timing.mark("fork", 0.1)
    timing.mark("result", 0.6)  # a cold capture: no fork server, no clock
    assert timing.spans() == [("fork", 0.1), ("result", 0.5)]
