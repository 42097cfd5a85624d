"""Prints at import and when called: the output must not reach the result pipe."""

import jax.numpy as jnp

print("noisy: imported")


def f(x):
    print("noisy: tracing")
    return jnp.cos(x)
