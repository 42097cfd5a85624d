"""A target whose only profile (jaxlsp.toml, shipped) learns its inputs by running train.py."""

import jax.numpy as jnp


def layer(x):
    h = x @ jnp.ones((x.shape[-1], 16))
    return jnp.tanh(h)
