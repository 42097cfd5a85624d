"""Allocates without bound at import (address space only: the pages are never touched)."""

import numpy as np

hoard = []
while True:
    hoard.append(np.empty(256 * 1024 * 1024, dtype=np.uint8))


def f(x):
    return x
