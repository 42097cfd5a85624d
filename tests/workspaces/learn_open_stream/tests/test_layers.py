"""One test file: its first test calls ``dense`` at once, its second sleeps until the learn's limit
stops the file. ``dense``'s learned call must reach the editor while the file still runs."""

import time

from pkg.layers import dense


def test_dense(x, w):
    assert dense(x, w).shape == (3, 5)


def test_slow_after_it():
    time.sleep(600)
