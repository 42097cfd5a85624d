import jax.numpy as jnp
import pytest
from tested import shift


@pytest.fixture
def batch():
    return jnp.ones((2, 7))


def test_shift(batch):
    assert shift(batch).shape == (2, 7)
