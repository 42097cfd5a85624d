"""Plain JAX functions."""

import jax
import jax.numpy as jnp


def attention(q, k, v, causal=False):
    scores = q @ k.T / jnp.sqrt(q.shape[-1])
    if causal:
        mask = jnp.tril(jnp.ones((q.shape[0], k.shape[0]), bool))
        scores = jnp.where(mask, scores, -1e9)
    return jax.nn.softmax(scores, axis=-1) @ v


@jax.jit
def mse(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2)


def normalize(x, eps=1e-6):
    return (x - jnp.mean(x, -1, keepdims=True)) / (jnp.std(x, -1, keepdims=True) + eps)


def apply_layers(x, fn):
    return fn(x)


def never_called_statically(x):
    return jnp.sin(x) * 2.0


def slow_to_reach(x):
    return jnp.cos(x) + 1.0


def unreachable(x):
    return jnp.exp(x)


def softsign(x):
    return x / (1 + jnp.abs(x))
