import jax.numpy as jnp


def act(x):
    return jnp.tanh(x)
