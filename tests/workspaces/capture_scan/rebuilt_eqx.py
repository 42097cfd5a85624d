"""Equinox fixture: a module rebuilt inside the call that matches two modules of the tree."""

import equinox as eqx
import jax


class Twins(eqx.Module):
    first: eqx.nn.Linear
    second: eqx.nn.Linear

    def __init__(self, width: int = 5, *, key):
        k1, k2 = jax.random.split(key)
        self.first = eqx.nn.Linear(width, width, key=k1)
        self.second = eqx.nn.Linear(width, width, key=k2)

    def __call__(self, h):
        copy = jax.tree_util.tree_map(lambda leaf: leaf, self.first)  # a new object, like first and second
        return self.second(copy(h))
