import jax
import jax.numpy as jnp
import pytest

from tinylm.layers import Config


@pytest.fixture
def config():
    return Config(width=16, heads=2, hidden=32, layers=2)


@pytest.fixture
def tokens():
    return jnp.zeros((2, 8), dtype=jnp.int32)


@pytest.fixture
def key():
    return jax.random.key(0)
