"""Grows one bytearray without bound at trace time (each step copies, touching the pages)."""

hoard = bytearray()


def f(x):
    global hoard
    while True:
        hoard += b"\0" * (64 * 1024 * 1024)
    return x
