"""Equinox's own tests' layout: the layer is built inside a class local to the test function."""

import equinox as eqx
import jax.numpy as jnp

from zoo.tied import Tied


def test_a_layer_inside_a_local_model():
    class Model(eqx.Module):
        tied: Tied

        def __init__(self):
            self.tied = Tied(jnp.ones((4, 2)))

        def __call__(self, x):
            return self.tied(x)

    assert Model()(jnp.ones((3, 4))).shape == (3, 2)
