"""Live shapes: a target whose profile (jaxlsp.toml) does not fit its body, so every live trace fails."""

import jax.numpy as jnp


def bad(x):
    w = jnp.ones((3, 3))
    return x @ w
