"""Live shapes: equimo's layout (core/layers/generic.py's BlockChunk): the complete call site is
in tests/test_chunk.py and hands the target a function defined in that test file, which imports
its sibling tests/helpers.py (as pytest, with tests/ on sys.path, lets it)."""

import jax.numpy as jnp


def apply(block, x):
    y = block(x)
    return jnp.sum(y, axis=0)
