"""Live shapes: a target with two profiles (which one a live trace would use is the user's call)."""

import jax.numpy as jnp


def double(x):
    return jnp.concatenate([x, x])
