"""Live shapes: a target with a profile (jaxlsp.toml); each import adds a line to IMPORTS."""

import pathlib

with open(pathlib.Path(__file__).with_name("IMPORTS"), "a") as log:
    log.write("model\n")

import jax.numpy as jnp  # noqa: E402

WIDTH = 16


def layer(x):
    w = jnp.ones((x.shape[-1], WIDTH))
    h = x @ w
    return jnp.tanh(h)
