import jax
import jax.numpy as jnp


@jax.jit
def forward(x):
    return jnp.tanh(x) * 2
