"""A script that defines the function it runs (run as __main__ with a size)."""

import functools
import sys

import jax
import jax.numpy as jnp


@jax.jit  # traced at its first call: the capture must not wait on the jit cache the run holds
def step(x, scale=2.0):
    return jnp.tanh(x) * scale


class Table:
    """A plain object handed to a jitted function as a static argument."""

    width = 3


@functools.partial(jax.jit, static_argnums=1)
def widen(x, table):
    return jnp.tile(x, (1, table.width))


if __name__ == "__main__":
    rows = int(sys.argv[1])
    print(step(jnp.ones((rows, 2))).shape)
    print(widen(jnp.ones((rows, 2)), Table()).shape)
