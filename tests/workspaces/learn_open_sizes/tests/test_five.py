"""Calls ``dense`` with batch 5 once the test driving the editor writes ``release`` (a minute at
most): after the other file's call was traced and shown. It teaches no new target."""

import time
from pathlib import Path

from pkg.layers import dense


def test_batch_five_after_the_release(five, w):
    release = Path(__file__).resolve().parents[1] / "release"
    waited = time.monotonic()
    while not release.exists() and time.monotonic() - waited < 60:
        time.sleep(0.1)
    assert dense(five, w).shape == (5, 4)
