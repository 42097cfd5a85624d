"""Where a live trace's time went (jaxlsp/capture/launch/phases.py): spans between marks, the traced
child's own phases in the span that ended with its result, and every moment counted once."""

from __future__ import annotations

from jaxlsp.capture.launch.phases import Phases, summary


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
        "discover", "wait", "fork", "child start", "jax", "import", "init", "make_jaxpr", "build", "json",
        "worker other", "to server", "store",
    ]  # fmt: skip
    values = dict(spans)
    assert values["jax"] == values["init"] == values["json"] == 0.0  # not reported: 0, still named
    assert values["child start"] == 0.0  # the child began before the server heard of the fork
    assert abs(values["worker other"] - 0.05) < 1e-9 and abs(values["to server"] - 0.1) < 1e-9
    assert abs(sum(values.values()) - timing.total()) < 1e-9 and abs(timing.total() - 1.0) < 1e-9
    assert summary("f", "fresh", timing).startswith("live f fresh in 1.000 s: discover 0.010 \u00b7 wait 0.010")


EVERY = ["child start", "jax", "import", "init", "make_jaxpr", "build", "json", "worker other", "to server"]


def test_a_fork_heard_after_the_child_finished_still_splits_the_result_span() -> None:
    # A loaded machine: the server's loop read the spare's "started" only after the child had
    # written its result. The phases still come out, every moment counted once.
    timing = Phases(saved=10.0)
    timing.mark("spare", 10.01)
    timing.mark("fork", 10.5)  # heard late
    timing.took({"jax": 0.0, "import": 0.05, "init": 0.1, "trace": 0.1, "build": 0.02, "serialize": 0.01},
                {"forked": 10.02, "done": 10.32})  # fmt: skip
    timing.mark("result", 10.52)
    timing.mark("reap", 10.55)
    spans = timing.spans()
    assert [name for name, _ in spans] == ["spare", "fork", *EVERY, "reap"]
    values = dict(spans)
    assert abs(values["fork"] - 0.01) < 1e-9 and values["child start"] == 0.0 and values["import"] == 0.05
    assert abs(values["worker other"] - 0.02) < 1e-9 and abs(values["to server"] - 0.2) < 1e-9
    assert abs(sum(values.values()) - timing.total()) < 1e-9


def test_a_cold_capture_names_every_phase_too() -> None:
    # No warm spare (it was starting, or retired): no fork and no child clock, only its durations.
    timing = Phases(saved=0.0)
    timing.mark("spare", 0.1)
    timing.took({"jax": 0.5, "import": 0.1, "init": 0.1, "trace": 0.2}, None)
    timing.mark("result", 1.6)
    values = dict(timing.spans())
    assert list(values) == ["spare", "fork", *EVERY]
    assert values["fork"] == 0.0 and abs(values["child start"] - 0.6) < 1e-9 and values["to server"] == 0.0
    assert abs(sum(values.values()) - timing.total()) < 1e-9


def test_only_the_last_result_is_split_when_a_trace_ran_twice() -> None:
    # A hinted trace whose structure check disagreed runs again: the clock and durations are the
    # second child's, so only its result span is split, and nothing is counted twice.
    timing = Phases(saved=0.0)
    timing.mark("fork", 0.1)
    timing.mark("result", 0.5)
    timing.mark("fork", 0.6)
    timing.took({"import": 0.1, "trace": 0.2}, {"forked": 0.59, "done": 1.0})
    timing.mark("result", 1.1)
    spans = timing.spans()
    assert [name for name, _ in spans] == ["fork", "result", "fork", *EVERY]
    assert abs(sum(seconds for _, seconds in spans) - timing.total()) < 1e-9


def test_the_summary_names_what_the_trace_reused() -> None:
    from jaxlsp.capture.launch import phases

    timing = Phases(saved=1.0)
    timing.mark("store", 1.5)
    assert "reused" not in summary("f", "fresh", timing)
    token = phases.CURRENT.set(timing)
    try:
        phases.reused("graph (moved)")
    finally:
        phases.CURRENT.reset(token)
    phases.reused("nothing: outside a trace")
    assert summary("f", "fresh", timing).endswith("store 0.500 \u00b7 reused graph (moved)")
