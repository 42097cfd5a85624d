"""Live shapes: a target whose only inputs come from running a test (a fixture makes them)."""

import pathlib

with open(pathlib.Path(__file__).with_name("IMPORTS"), "a") as log:
    log.write("tested\n")

import jax.numpy as jnp  # noqa: E402


def shift(x):
    y = x + 1.0
    return jnp.tanh(y)
