"""A function whose only static call is written to fail: inside a helper defined in a ``with
pytest.raises`` block (tests/test_raising.py)."""

import jax.numpy as jnp


def clip(x, low):
    if low < 0:
        raise ValueError("low must be non-negative")
    return jnp.clip(x, min=low)
