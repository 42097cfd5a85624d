"""Narrow decoder-only language models in Flax NNX and Equinox with a configurable depth, built
abstractly as the capture worker builds them: the targets of benchmarks/init_share.py.

Each block is RMSNorm, single-head causal-free attention (q, k, v, o projections) and a SwiGLU
MLP, so that a model has nine parameters a layer, as real LLM blocks do, and stays cheap to run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from flax import nnx

VOCAB, DIM, HIDDEN, TOKENS = 512, 64, 128, 16


class NNXBlock(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.attention_norm = nnx.RMSNorm(DIM, rngs=rngs)
        self.q = nnx.Linear(DIM, DIM, use_bias=False, rngs=rngs)
        self.k = nnx.Linear(DIM, DIM, use_bias=False, rngs=rngs)
        self.v = nnx.Linear(DIM, DIM, use_bias=False, rngs=rngs)
        self.o = nnx.Linear(DIM, DIM, use_bias=False, rngs=rngs)
        self.mlp_norm = nnx.RMSNorm(DIM, rngs=rngs)
        self.gate = nnx.Linear(DIM, HIDDEN, use_bias=False, rngs=rngs)
        self.up = nnx.Linear(DIM, HIDDEN, use_bias=False, rngs=rngs)
        self.down = nnx.Linear(HIDDEN, DIM, use_bias=False, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = self.attention_norm(x)
        scores = jnp.einsum("bqd,bkd->bqk", self.q(y), self.k(y)) / jnp.sqrt(DIM)
        x = x + self.o(jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, axis=-1), self.v(y)))
        y = self.mlp_norm(x)
        return x + self.down(nnx.silu(self.gate(y)) * self.up(y))


class NNXLM(nnx.Module):
    def __init__(self, depth: int, rngs: nnx.Rngs) -> None:
        self.embed = nnx.Embed(VOCAB, DIM, rngs=rngs)
        self.blocks = nnx.List([NNXBlock(rngs) for _ in range(depth)])
        self.head = nnx.Linear(DIM, VOCAB, use_bias=False, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class EqxBlock(eqx.Module):
    attention_norm: eqx.nn.RMSNorm
    q: eqx.nn.Linear
    k: eqx.nn.Linear
    v: eqx.nn.Linear
    o: eqx.nn.Linear
    mlp_norm: eqx.nn.RMSNorm
    gate: eqx.nn.Linear
    up: eqx.nn.Linear
    down: eqx.nn.Linear

    def __init__(self, key: jax.Array) -> None:
        keys = jax.random.split(key, 7)
        self.attention_norm = eqx.nn.RMSNorm(DIM)
        self.q, self.k, self.v, self.o = (eqx.nn.Linear(DIM, DIM, use_bias=False, key=k) for k in keys[:4])
        self.mlp_norm = eqx.nn.RMSNorm(DIM)
        self.gate = eqx.nn.Linear(DIM, HIDDEN, use_bias=False, key=keys[4])
        self.up = eqx.nn.Linear(DIM, HIDDEN, use_bias=False, key=keys[5])
        self.down = eqx.nn.Linear(HIDDEN, DIM, use_bias=False, key=keys[6])

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.vmap(self.attention_norm)(x)
        scores = jax.vmap(self.q)(y) @ jax.vmap(self.k)(y).T / jnp.sqrt(DIM)
        x = x + jax.vmap(self.o)(jax.nn.softmax(scores, axis=-1) @ jax.vmap(self.v)(y))
        y = jax.vmap(self.mlp_norm)(x)
        return x + jax.vmap(self.down)(jax.nn.silu(jax.vmap(self.gate)(y)) * jax.vmap(self.up)(y))


class EqxLM(eqx.Module):
    embed: eqx.nn.Embedding
    blocks: list[EqxBlock]
    head: eqx.nn.Linear

    def __init__(self, depth: int, key: jax.Array) -> None:
        keys = jax.random.split(key, depth + 2)
        self.embed = eqx.nn.Embedding(VOCAB, DIM, key=keys[0])
        self.blocks = [EqxBlock(k) for k in keys[1:-1]]
        self.head = eqx.nn.Linear(DIM, VOCAB, use_bias=False, key=keys[-1])

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = jax.vmap(self.embed)(tokens)
        for block in self.blocks:
            x = block(x)
        return jax.vmap(self.head)(x)


def _abstract_leaf(x: Any) -> bool:
    return eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def abstract(kind: str, depth: int) -> tuple[Any, Callable[[Any, Any], Any], jax.ShapeDtypeStruct]:
    """The model built abstractly (what the worker's init phase does), the call to trace on its
    abstract weights and the tokens' shape."""
    if kind == "nnx":
        model = nnx.eval_shape(lambda: NNXLM(depth, nnx.Rngs(0)))
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        return params, lambda p, x: nnx.merge(graphdef, p, rest)(x), jax.ShapeDtypeStruct((2, TOKENS), jnp.int32)
    built = eqx.filter_eval_shape(lambda k: EqxLM(depth, k), jax.random.key(0))
    weights, static = eqx.partition(built, _abstract_leaf)
    return weights, lambda w, x: eqx.combine(w, static)(x), jax.ShapeDtypeStruct((TOKENS,), jnp.int32)
