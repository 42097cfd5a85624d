import jax
import jax.numpy as jnp

from nets.blocks import Other, Small


def make():
    return jnp.ones((2, 3)) * jnp.arange(3.0)


def test_other():
    Other().init(jax.random.key(0), make())


def test_small():
    Small().init(jax.random.key(0), make())


def _run_small(n):
    Small().init(jax.random.key(n), make())


def test_through_a_helper():
    _run_small(1)
