"""Plain JAX functions: scaled dot-product attention and helpers."""

import math

import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return jax.nn.softmax(scores, axis=-1) @ v


def causal_mask(n: int) -> jax.Array:
    return jnp.tril(jnp.ones((n, n), dtype=bool))


def cumulative(x: jax.Array) -> jax.Array:
    return lax.associative_scan(jnp.add, x)


def describe(shape: tuple[int, ...]) -> str:
    """Mentions jax.numpy in a docstring, but uses no JAX: no lens."""
    return "x".join(map(str, shape))
