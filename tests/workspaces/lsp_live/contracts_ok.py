"""Live shapes: jaxtyping annotations that the traced values keep (no shape contract broken)."""

import jax.numpy as jnp
from jaxtyping import Array, Float


def dense(x: Float[Array, "batch d"], w: Float[Array, "d k"]) -> Float[Array, "batch k"]:
    return x @ w


def clean(tokens: Float[Array, "batch 64"]) -> Float[Array, "batch 16"]:
    h = dense(tokens, jnp.ones((64, 32)))
    return dense(h, jnp.ones((32, 16)))
