import jax.numpy as jnp
from sites import scale


def test_scale():
    assert scale(jnp.ones((3, 5)), jnp.ones((3, 5))).shape == (5,)
