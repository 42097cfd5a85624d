import jax.numpy as jnp
from pkg.means import Constant


def test_constant():
    assert Constant(jnp.array([2.0]))(jnp.ones((5, 2))).shape == (5, 1)
