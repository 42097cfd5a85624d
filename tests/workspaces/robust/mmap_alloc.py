"""Maps anonymous memory without bound at trace time, as a memory-mapped dataset loader might."""

import mmap

hoard = []


def f(x):
    while True:
        hoard.append(mmap.mmap(-1, 256 * 1024 * 1024))
    return x
