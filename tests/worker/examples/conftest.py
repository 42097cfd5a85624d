"""Fixtures of the learning tests that run in this process (real JAX)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

jax = pytest.importorskip("jax")


@pytest.fixture
def x64() -> Iterator[None]:
    """JAX's x64 on for the test, as it was after."""
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)
