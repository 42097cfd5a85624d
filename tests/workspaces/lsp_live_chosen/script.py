"""A script with no __main__ guard: its top level trains (and logs each run to TRAINED)."""

import pathlib

import jax.numpy as jnp

HIDDEN = len("abc")  # computed by a call: a definitions-only load leaves it unset


def step(x):
    h = x @ jnp.ones((x.shape[-1], 3))
    return jnp.tanh(h)


def widened(x):
    h = x @ jnp.ones((x.shape[-1], HIDDEN))
    return jnp.tanh(h)


with open(pathlib.Path(__file__).with_name("TRAINED"), "a") as log:
    log.write("trained\n")
for _ in range(3):
    step(jnp.ones((4, 8)))
