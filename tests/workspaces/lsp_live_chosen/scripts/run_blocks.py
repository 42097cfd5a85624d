"""Applies blocks.apply to a library function."""

import jax.numpy as jnp

from blocks import apply

print(apply(jnp.tanh, jnp.ones((2, 4))))
