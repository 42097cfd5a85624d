"""Allocates without bound inside the traced function (address space only: pages never touched)."""

import numpy as np


def f(x):
    hoard = []
    while True:
        hoard.append(np.empty(256 * 1024 * 1024, dtype=np.uint8))
