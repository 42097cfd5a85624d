"""Equinox stacked-layers fixture: layers built with eqx.filter_vmap, applied with lax.scan."""

import equinox as eqx
import jax
from jax import lax


class Cell(eqx.Module):
    linear: eqx.nn.Linear
    norm: eqx.nn.LayerNorm

    def __init__(self, width: int, *, key):
        self.linear = eqx.nn.Linear(width, width, key=key)
        self.norm = eqx.nn.LayerNorm(width)

    def __call__(self, h):
        return jax.nn.relu(self.norm(self.linear(h)))


class StackedNet(eqx.Module):
    blocks: Cell
    readout: eqx.nn.Linear

    def __init__(self, width: int = 6, depth: int = 3, *, key):
        keys = jax.random.split(key, depth + 1)
        self.blocks = eqx.filter_vmap(lambda k: Cell(width, key=k))(keys[:depth])
        self.readout = eqx.nn.Linear(width, 2, key=keys[-1])

    def __call__(self, h):
        arrays, rest = eqx.partition(self.blocks, eqx.is_array)

        def step(carry, layer_arrays):
            cell = eqx.combine(layer_arrays, rest)
            return cell(carry), None

        h, _ = lax.scan(step, h, arrays)
        return self.readout(h)
