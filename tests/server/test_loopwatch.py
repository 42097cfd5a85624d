"""The loop watchdog (``JAXLSP_LOOP_WATCH``, jaxlsp/server/loopwatch.py): a callback that holds the
event loop is reported once, with its stack; nothing is watched unless asked."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from jaxlsp.server import loopwatch


def holds_the_loop() -> None:
    time.sleep(0.3)  # what is being detected (the watchdog's threshold is 50 ms)


def test_a_held_loop_is_reported_with_the_stack_that_held_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(loopwatch.ENV, "50")

    async def main() -> None:
        with loopwatch.watching() as watch:
            assert watch is not None
            await asyncio.sleep(0.05)
            holds_the_loop()
            await asyncio.sleep(0.1)  # the loop runs again: the stall is reported

    with caplog.at_level(logging.WARNING, logger=loopwatch.__name__):
        asyncio.run(main())
    reports = [r.getMessage() for r in caplog.records if "loop held" in r.getMessage()]
    # (a busy machine may delay a heartbeat past 50 ms too: that one is reported as well)
    held = [r for r in reports if "holds_the_loop" in r]
    assert len(held) == 1, reports
    assert "threads on CPU meanwhile: loop" in held[0]


def test_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(loopwatch.ENV, raising=False)

    async def main() -> None:
        with loopwatch.watching() as watch:
            assert watch is None

    asyncio.run(main())
    monkeypatch.setenv(loopwatch.ENV, "soon")
    assert loopwatch.threshold_from_env() is None
