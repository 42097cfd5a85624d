import jax.numpy as jnp
import pkg


def test_scale():
    assert pkg.scale(jnp.ones((4, 2)), 2.0).shape == (4, 2)
