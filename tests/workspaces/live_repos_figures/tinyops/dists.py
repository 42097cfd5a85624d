"""Annotated with jaxtyping and called by nothing: traced on open with ``n``, ``m`` and ``d`` symbolic."""

import jax.numpy as jnp
from jaxtyping import Array, Float


def pairwise(x: Float[Array, "n d"], y: Float[Array, "m d"]) -> Float[Array, "n m"]:
    diff = x[:, None, :] - y[None, :, :]
    squared = jnp.square(diff)
    return jnp.sum(squared, axis=-1)


def total(x: Float[Array, "n d"], y: Float[Array, "m d"]) -> Float[Array, ""]:
    distances = pairwise(x, y)
    return jnp.sum(distances)
