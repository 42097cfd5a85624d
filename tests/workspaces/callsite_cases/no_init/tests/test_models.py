import jax
import jax.numpy as jnp
import pytest

from pkg import models as mm


def make():
    return jnp.ones((2, 3)) * jnp.arange(3.0)


@pytest.mark.parametrize("cls", [mm.Small, mm.Big])
def test_init(cls):
    cls().init(jax.random.key(0), make())
