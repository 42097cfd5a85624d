"""Live shapes: a target with a profile (jaxlsp.toml); each import adds a line to IMPORTS."""

import pathlib  # noqa: F401

# each load adds "model" to IMPORTS: a live trace runs the imports, not the rest of the top level
import imported_model  # noqa: E402,F401

import jax.numpy as jnp  # noqa: E402

WIDTH = 16


def layer(x):
    w = jnp.ones((x.shape[-1], WIDTH))
    h = x @ w
    return jnp.tanh(h)
