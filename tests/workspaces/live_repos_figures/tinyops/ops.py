"""Called only by a test, with an input no static call site spells: live once learned."""

import jax.numpy as jnp


def scale(x):
    return jnp.multiply(x, 2.0)
