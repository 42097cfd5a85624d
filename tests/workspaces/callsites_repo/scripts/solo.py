"""A script that defines the function it runs (run as __main__ with a size)."""

import sys

import jax
import jax.numpy as jnp


@jax.jit  # traced at its first call: the capture must not wait on the jit cache the run holds
def step(x, scale=2.0):
    return jnp.tanh(x) * scale


if __name__ == "__main__":
    rows = int(sys.argv[1])
    print(step(jnp.ones((rows, 2))).shape)
