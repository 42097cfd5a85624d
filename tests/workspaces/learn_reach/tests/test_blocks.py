import jax.numpy as jnp

from pkg.blocks import block


def test_block():
    assert block(jnp.ones((2, 4)), jnp.ones((4, 4))).shape == (2, 4)
