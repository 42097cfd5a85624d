import jax.numpy as jnp

from pkg.layers import dense


def test_dense():
    assert dense(jnp.ones((3, 2)), jnp.ones((2, 5))).shape == (3, 5)
