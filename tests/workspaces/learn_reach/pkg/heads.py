import jax.numpy as jnp


def split(x, heads):
    return jnp.reshape(x, (x.shape[0], heads, -1))
