import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.sin(x) + 1
