"""Writes 100 MB to stdout and 100 MB to stderr at import, then traces fine."""

import os

import jax.numpy as jnp

chunk = b"x" * (1024 * 1024 - 1) + b"\n"
for _ in range(100):
    os.write(1, chunk)
    os.write(2, chunk)
print("robust-flood: done", flush=True)


def f(x):
    return jnp.cos(x)
