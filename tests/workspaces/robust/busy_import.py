"""Spins the CPU forever at import (no sleep, no system call)."""

print("robust-busy: importing", flush=True)
while True:
    pass


def f(x):
    return x
