"""Imports pkg/layers.py too, and is slow: the learn on open of it lasts until this one is stopped."""

import time

from pkg.layers import dense


def test_dense_after_a_long_wait(x, w):
    time.sleep(600)
    assert dense(x, w).shape == (3, 5)
