"""A layer that the tests only build inside a model class defined in a test function."""

import equinox as eqx
import jax
import jax.numpy as jnp


class Tied(eqx.Module):
    weight: jax.Array

    def __init__(self, weight: jax.Array) -> None:
        self.weight = weight

    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ self.weight)
