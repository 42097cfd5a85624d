"""A jaxtyping-checked package, loaded in its tests through jaxtyping's import hook (GPJax's)."""

import jax.numpy as jnp
from jaxtyping import Array, Float


def scale(x: Float[Array, "n m"], factor: float) -> Float[Array, "n m"]:
    return jnp.tanh(x) * factor
