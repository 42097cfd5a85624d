import jax
import jax.numpy as jnp

from pkg.m import f


def test_f():
    a = jnp.abs(jax.random.normal(jax.random.key(0), (2, 3)))
    b = jnp.abs(jax.random.normal(jax.random.key(1), (3,)))
    assert f(a, b).shape == (2, 3)
