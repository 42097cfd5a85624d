"""Live shapes: a target whose only inputs come from running a test (a fixture makes them)."""

import pathlib  # noqa: F401

# each load adds "tested" to IMPORTS: a live trace runs the imports, not the rest of the top level
import imported_tested  # noqa: E402,F401

import jax.numpy as jnp  # noqa: E402


def shift(x):
    y = x + 1.0
    return jnp.tanh(y)
