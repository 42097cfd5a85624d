import jax
import jax.numpy as jnp
import not_installed_anywhere  # noqa: F401

from pkg.models import Small


def test_a():
    x = jnp.ones((2, 3)) * jax.numpy.arange(3.0)
    Small().init(jax.random.key(0), x)
