"""The live queue (jaxlsp/live/schedule.py) with a fake trace: coalescing, one at a time,
preemption, failures that wait for a change, nothing re-run for the same text."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from jaxlsp.live.schedule import FAILED, FRESH, LiveScheduler, Outcome, Target
from tests.deadlines import scaled

A, B = Target("file:///a.py", "a"), Target("file:///b.py", "b")


class Fake:
    """A trace that takes as long as the test says (``release``) and ends as ``outcome`` says."""

    def __init__(self) -> None:
        self.calls: list[Target] = []
        self.running = 0
        self.most = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.outcome = Outcome(FRESH, trace_id="t")

    async def __call__(self, target: Target) -> Outcome:
        self.calls.append(target)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.gate.wait()
            return self.outcome
        finally:
            self.running -= 1


async def until(done: Callable[[], bool]) -> None:
    """Wait (a deadline, not a pace) until ``done()`` holds."""

    async def loop() -> None:
        while not done():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(loop(), scaled(10))


async def idle(scheduler: LiveScheduler) -> None:
    await until(lambda: not scheduler.busy())


async def test_a_burst_of_saves_runs_at_most_two_traces_and_the_last_text_wins() -> None:
    fake = Fake()
    fake.gate.clear()  # each trace runs until the test lets it end
    scheduler = LiveScheduler(run=fake, quiet=0.1, burst=0.3)
    for i in range(10):
        scheduler.submit([(A, f"text {i}")])
        await asyncio.sleep(0.02)
    fake.gate.set()
    await idle(scheduler)
    assert scheduler.started <= 2 and fake.calls[-1] == A
    assert scheduler.statuses[A].state == FRESH and scheduler.statuses[A].fingerprint == "text 9"


async def test_one_trace_at_a_time_newest_save_first() -> None:
    fake = Fake()
    fake.gate.clear()
    scheduler = LiveScheduler(run=fake, quiet=0.05, burst=0.0)
    scheduler.submit([(A, "1")])
    await asyncio.sleep(0.05)
    scheduler.submit([(B, "1")])
    fake.gate.set()
    await idle(scheduler)
    assert fake.calls == [A, B] and fake.most == 1


async def test_the_same_text_is_not_traced_again() -> None:
    fake = Fake()
    scheduler = LiveScheduler(run=fake, burst=0.0)
    scheduler.submit([(A, "1")])
    await idle(scheduler)
    scheduler.submit([(A, "1")])
    await idle(scheduler)
    assert fake.calls == [A]
    scheduler.submit([(A, "2")])
    await idle(scheduler)
    assert fake.calls == [A, A]


async def test_two_failures_with_one_cause_wait_for_a_change() -> None:
    fake = Fake()
    fake.outcome = Outcome(FAILED, "trace at m.py:3: shapes differ")
    scheduler = LiveScheduler(run=fake, burst=0.0)
    for _ in range(4):
        scheduler.submit([(A, "1")])
        await idle(scheduler)
    assert len(fake.calls) == 2 and scheduler.statuses[A].waiting
    scheduler.submit([(A, "2")])  # its files changed
    await idle(scheduler)
    assert len(fake.calls) == 3


async def test_new_learned_inputs_trace_a_waiting_or_fresh_target_again_on_the_same_text() -> None:
    """Learning kept new inputs for ``a`` (a learned call that failed at a value check now has its
    test kept to replay; another batch size): its text is the same, and it is traced again; ``b``,
    in the same file with no new inputs, is not."""
    fake = Fake()
    fake.outcome = Outcome(FAILED, "trace at m.py:3: TracerBoolConversionError")
    scheduler = LiveScheduler(run=fake, burst=0.0)
    a, b = Target("file:///m.py", "a"), Target("file:///m.py", "b")
    for _ in range(2):
        scheduler.submit([(a, "1")])
        await idle(scheduler)
    assert scheduler.statuses[a].waiting
    fake.outcome = Outcome(FRESH, trace_id="t")
    scheduler.submit([(b, "1")])
    await idle(scheduler)
    scheduler.inputs_changed("file:///m.py", {"a"})
    scheduler.submit([(a, "1"), (b, "1")])
    await idle(scheduler)
    assert fake.calls == [a, a, b, a] and scheduler.statuses[a].state == FRESH
    scheduler.inputs_changed("file:///m.py", {"a"})  # fresh, and new inputs again
    scheduler.submit([(a, "1"), (b, "1")])
    await idle(scheduler)
    assert fake.calls == [a, a, b, a, a]


async def test_an_explicit_trace_preempts_and_the_live_one_resumes_after() -> None:
    fake = Fake()
    fake.gate.clear()
    scheduler = LiveScheduler(run=fake, burst=0.0)
    scheduler.submit([(A, "1")])
    await asyncio.sleep(0.05)
    assert fake.running == 1
    scheduler.pause()
    await asyncio.sleep(0.05)
    assert fake.running == 0 and scheduler.statuses[A].state != FRESH  # cancelled, queued again
    fake.gate.set()
    scheduler.resume()
    await idle(scheduler)
    assert fake.calls == [A, A] and scheduler.statuses[A].state == FRESH


async def test_turned_off_nothing_runs() -> None:
    fake = Fake()
    scheduler = LiveScheduler(run=fake, burst=0.0)
    scheduler.disable()
    scheduler.submit([(A, "1")])
    await asyncio.sleep(0.05)
    assert fake.calls == [] and not scheduler.busy()


async def test_a_burst_of_opens_that_cancels_a_running_trace_queues_it_again() -> None:
    # Opening several files at once is a burst: the second open's quiet period cancels the trace
    # started for the first; that target is still wanted (nothing newer submitted it), so it runs
    # after the quiet period instead of staying "queued" with nothing to run it (seen on distreqx:
    # 24 targets opened, one queued forever).
    fake = Fake()
    fake.gate.clear()
    scheduler = LiveScheduler(run=fake, quiet=0.05, burst=0.3)
    scheduler.submit([(A, "1")])
    await until(lambda: fake.running == 1)  # A is tracing
    assert fake.calls == [A]
    scheduler.submit([(B, "1")])  # another file, within the burst
    fake.gate.set()
    await idle(scheduler)
    assert scheduler.statuses[A].state == FRESH and scheduler.statuses[B].state == FRESH
    assert fake.calls.count(A) == 2 and fake.most == 1


C = Target("file:///c.py", "c")


async def test_with_two_slots_two_traces_run_side_by_side_and_never_more() -> None:
    # Opening many files queues many targets: with the capture service's two slots, two trace at
    # once (issue 56: one at a time, a 300-target library took 5 minutes to settle).
    fake = Fake()
    fake.gate.clear()
    scheduler = LiveScheduler(run=fake, burst=0.0, slots=2)
    scheduler.submit([(A, "1"), (B, "1"), (C, "1")])
    await until(lambda: fake.running == 2)
    assert fake.calls == [A, B] and scheduler.statuses[C].state == "queued"
    fake.gate.set()
    await idle(scheduler)
    assert fake.calls == [A, B, C] and fake.most == 2
    assert all(scheduler.statuses[t].state == FRESH for t in (A, B, C))


async def test_an_explicit_trace_preempts_every_running_live_trace() -> None:
    fake = Fake()
    fake.gate.clear()
    scheduler = LiveScheduler(run=fake, burst=0.0, slots=2)
    scheduler.submit([(A, "1"), (B, "1")])
    await until(lambda: fake.running == 2)
    scheduler.pause()
    await until(lambda: fake.running == 0)
    assert {scheduler.statuses[t].state for t in (A, B)} == {"queued"}
    fake.gate.set()
    scheduler.resume()
    await idle(scheduler)
    assert fake.calls == [A, B, A, B] and all(scheduler.statuses[t].state == FRESH for t in (A, B))


async def test_a_new_text_of_a_running_target_replaces_its_trace_in_its_slot() -> None:
    fake = Fake()
    fake.gate.clear()
    scheduler = LiveScheduler(run=fake, burst=0.0, slots=2)
    scheduler.submit([(A, "1"), (B, "1")])
    await until(lambda: fake.running == 2)
    scheduler.submit([(A, "2")])  # saved again: the trace for "1" is cancelled
    await until(lambda: fake.calls.count(A) == 2)
    fake.gate.set()
    await idle(scheduler)
    assert scheduler.statuses[A].state == FRESH and scheduler.statuses[A].fingerprint == "2"
    assert scheduler.statuses[B].state == FRESH and fake.most == 2


async def test_the_document_the_editor_shows_goes_first() -> None:
    # Opening three files queues their targets, the last opened first; the editor then asks for
    # the lenses of the one it shows (here the first opened): its targets move to the front.
    fake = Fake()
    fake.gate.clear()
    scheduler = LiveScheduler(run=fake, burst=0.0, slots=1)
    scheduler.submit([(A, "1")])
    await until(lambda: fake.running == 1)  # A took the slot
    scheduler.submit([(B, "1")])
    scheduler.submit([(C, "1")])  # queue: C, B
    scheduler.prefer(B.uri)
    fake.gate.set()
    await idle(scheduler)
    assert fake.calls == [A, B, C]


async def test_a_burst_that_cancels_a_trace_before_it_began_frees_its_slot() -> None:
    """Two submits in one turn of the loop (a learn's end touches every open file at once): the
    first starts a trace, the second, a burst, cancels it before its task ever ran. Its slot must
    be free again, or every later target stays queued (nmn: 148 targets, none traced after its
    learn)."""
    fake = Fake()
    scheduler = LiveScheduler(run=fake, quiet=0.05, burst=0.3)
    scheduler.submit([(A, "1")])  # not in a burst: starts at once
    scheduler.submit([(B, "1")])  # same turn: a burst, which cancels A's task before it starts
    await idle(scheduler)
    assert set(fake.calls) == {A, B}
    assert scheduler.statuses[A].state == FRESH and scheduler.statuses[B].state == FRESH
