import jax.numpy as jnp

from pkg.heads import split

HEADS = 2


def test_split():
    assert split(jnp.ones((2, 8)), HEADS).shape == (2, 2, 4)
