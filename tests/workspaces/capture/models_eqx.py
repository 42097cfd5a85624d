"""Equinox fixtures for the capture tests."""

import equinox as eqx
import jax
from jax import lax


class Scanned(eqx.Module):
    layers: list
    out: eqx.nn.Linear

    def __init__(self, d: int = 4, depth: int = 3, *, key):
        keys = jax.random.split(key, depth + 1)
        self.layers = [eqx.nn.Linear(d, d, key=k) for k in keys[:depth]]
        self.out = eqx.nn.Linear(d, 2, key=keys[-1])

    def __call__(self, x):
        def step(h, _):
            return jax.nn.tanh(self.layers[0](h)), None

        x, _ = lax.scan(step, x, None, length=5)
        x = self.layers[1](x)
        return self.out(x)
