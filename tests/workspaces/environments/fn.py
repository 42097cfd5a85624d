"""A plain JAX function (no flax): it traces in an environment without flax."""

import pathlib

pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")

import jax.numpy as jnp  # noqa: E402


def predict(w, x):
    h = jnp.tanh(x @ w)
    return h.sum(axis=-1)
