"""Segfaults at import (reads address 0 through ctypes)."""

import ctypes

print("hostile-segv: about to crash", flush=True)
ctypes.string_at(0)


def f(x):
    return x
