"""Needs a concrete value while being traced: ConcretizationTypeError."""

import jax.numpy as jnp


def f(x):
    scale = float(jnp.sum(x))
    return x * scale
