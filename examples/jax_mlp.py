"""A plain JAX MLP: parameters are a list of (weight, bias) pairs."""

import jax
import jax.numpy as jnp


def mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    *hidden, (w_out, b_out) = params
    for w, b in hidden:
        x = jax.nn.gelu(x @ w + b)
    return jax.nn.log_softmax(x @ w_out + b_out)
