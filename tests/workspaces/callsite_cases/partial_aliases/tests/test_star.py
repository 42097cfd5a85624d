import jax
import jax.numpy as jnp

from nets import *  # noqa: F403


def test_star():
    Net().init(jax.random.key(0), jnp.ones((2, 3)))  # noqa: F405
