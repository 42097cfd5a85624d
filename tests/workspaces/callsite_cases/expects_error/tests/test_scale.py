import jax.numpy as jnp
import pytest

from pkg.mod import scale


def test_negative():
    with pytest.raises(ValueError, match="positive"):
        scale(jnp.ones((2,)), factor=-1.0)


def test_scale():
    assert scale(jnp.ones((3, 5))).shape == (3, 5)
