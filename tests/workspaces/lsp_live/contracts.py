"""Live shapes: jaxtyping annotations checked against the traced values (shape contracts)."""

import jax.numpy as jnp
from jaxtyping import Array, Float


def wrong_dim(x: Float[Array, "batch 128"]) -> Float[Array, " batch"]:
    return x.sum(-1)


def mismatch(a: Float[Array, "batch n"], b: Float[Array, "batch n"]) -> Float[Array, "batch n"]:
    return a * b


def wrong_return(x: Float[Array, "batch d"]) -> Float[Array, "batch d"]:
    return x[:, :3]


def good(x: Float[Array, "batch d"], w: Float[Array, "d k"]) -> Float[Array, "batch k"]:
    return x @ w


def pipeline(tokens: Float[Array, "batch 64"]):
    s = wrong_dim(tokens)
    m = mismatch(tokens, tokens[:, :1])
    r = wrong_return(tokens)
    g = good(tokens, jnp.ones((64, 16)))
    return s, m, r, g
