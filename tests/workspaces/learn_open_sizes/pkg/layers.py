import jax.numpy as jnp


def dense(x, w):
    return jnp.tanh(x @ w)
