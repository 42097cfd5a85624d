import jax.numpy as jnp


def f(a, b):
    return jnp.sin(a) + b
