import jax.numpy as jnp


def total(x):
    return jnp.sum(x * x)
