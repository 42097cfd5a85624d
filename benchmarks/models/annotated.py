# ruff: noqa: F722  (jaxtyping dimension strings are not forward references)
"""A 12-layer MLP-mixer-like stack with jaxtyping annotations on every function (benchmarks/live.py:
the cost of checking shape contracts during a trace)."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

LAYERS = 12


def dense(x: Float[Array, "batch d"], w: Float[Array, "d k"], b: Float[Array, " k"]) -> Float[Array, "batch k"]:
    return x @ w + b


def norm(x: Float[Array, "batch d"]) -> Float[Array, "batch d"]:
    return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-6)


def block(x: Float[Array, "batch d"], w1: Float[Array, "d h"], w2: Float[Array, "h d"]) -> Float[Array, "batch d"]:
    h = jax.nn.gelu(dense(norm(x), w1, jnp.zeros(w1.shape[1])))
    return x + dense(h, w2, jnp.zeros(w2.shape[1]))


def model(x: Float[Array, "batch 256"]) -> Float[Array, "batch 256"]:
    for i in range(LAYERS):
        key = jax.random.key(i)
        w1 = jax.random.normal(key, (256, 1024)) * 0.02
        w2 = jax.random.normal(key, (1024, 256)) * 0.02
        x = block(x, w1, w2)
    return norm(x)
