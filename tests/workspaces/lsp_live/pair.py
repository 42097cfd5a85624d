"""Live shapes: two targets in one file (a save traces the one it edited first)."""

import jax.numpy as jnp

FIRST = 3


def first(x):
    return jnp.sin(x) * FIRST


def second(x):
    y = jnp.cos(x)
    return y + 1.0
