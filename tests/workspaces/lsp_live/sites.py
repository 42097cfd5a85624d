"""Live shapes: a target whose inputs come from a complete static call site (tests/test_sites.py)."""

import jax.numpy as jnp


def scale(x, y):
    z = x * y
    return jnp.sum(z, axis=0)
