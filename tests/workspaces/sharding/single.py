"""The same MLP on one device: no mesh, so no sharding anywhere in its graph."""

import jax.numpy as jnp


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"])
    return h @ params["w2"]
