import jax
import jax.numpy as jnp

from pkg.models import Small


def make():
    return jnp.ones((2, 3)) * jnp.arange(3.0)


def test_b():
    Small().init(jax.random.key(0), make())
