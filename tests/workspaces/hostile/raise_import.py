"""Raises at import."""

import jax.numpy as jnp


def f(x):
    return jnp.sin(x)


raise RuntimeError("hostile: the dataset is missing")
