import jax.numpy as jnp
import pytest

from raising import clip


def test_negative_low():
    with pytest.raises(ValueError):

        def call():
            return clip(jnp.ones((2, 3)), low=-1.0)

        call()
