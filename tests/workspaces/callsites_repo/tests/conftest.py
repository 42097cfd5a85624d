"""Fixtures shared by the zoo's tests; a test that needs them fails when conftest.py is not honoured."""

import jax.numpy as jnp
import pytest


@pytest.fixture
def zoo_batch():
    # Computed, not a literal: only a run of the test shows its shape.
    return jnp.stack([jnp.ones(3)] * 2)
