"""Three identical Linen layers in a row: the viewer rolls them up into one box."""

import flax.linen as nn
import jax
import jax.numpy as jnp


class Layer(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.tanh(nn.Dense(8)(x))


class Stack(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for _ in range(3):
            x = Layer()(x)
        return x.sum(axis=-1)
