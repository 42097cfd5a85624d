import jax.numpy as jnp
from helpers import double

from chunked import apply


def _block(x):
    return double(x) * 2.0


def test_apply():
    assert apply(_block, jnp.ones((3, 5))).shape == (10,)
