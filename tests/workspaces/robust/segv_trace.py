"""Segfaults inside the traced function (reads address 0 through ctypes)."""

import ctypes


def f(x):
    ctypes.string_at(0)
    return x
