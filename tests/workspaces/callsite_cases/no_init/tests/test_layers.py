import jax
import jax.numpy as jnp
import pytest
from extra import layers


def make():
    return jnp.ones((2, 3)) * jnp.arange(3.0)


@pytest.mark.parametrize("cls", [layers.Wide])
def test_wide(cls):
    cls().init(jax.random.key(0), make())
