"""An Equinox model whose cell only it calls."""

import equinox as eqx
import jax
import jax.numpy as jnp


class Cell(eqx.Module):
    weight: jax.Array

    def __init__(self, width: int, key: jax.Array):
        self.weight = jax.random.normal(key, (width, width))

    def __call__(self, h, x):
        return jnp.tanh(h @ self.weight + x)


class Recurrent(eqx.Module):
    cell: Cell

    def __init__(self, width: int, key: jax.Array):
        self.cell = Cell(width, key)

    def __call__(self, xs):
        h = jnp.zeros(xs.shape[-1])
        for x in xs:
            h = self.cell(h, x)
        return h
