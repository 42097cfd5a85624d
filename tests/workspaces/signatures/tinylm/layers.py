"""Layers only their parents call: nothing here is traced on its own without learned inputs."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Config:
    width: int = 16
    heads: int = 2
    hidden: int = 32
    layers: int = 2


def rms_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """Normalise the last axis."""
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)


def split_heads(x, heads):
    b, t, d = x.shape
    return x.reshape(b, t, heads, d // heads)


class Attention(nn.Module):
    config: Config

    @nn.compact
    def __call__(self, x):
        q = split_heads(nn.Dense(self.config.width)(x), self.config.heads)
        k = split_heads(nn.Dense(self.config.width)(x), self.config.heads)
        scores = jnp.einsum("bthd,bshd->bhts", q, k)
        return jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores), q).reshape(x.shape)


class FeedForward(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(x.shape[-1])(jax.nn.gelu(nn.Dense(self.hidden)(x)))


class Block(nn.Module):
    config: Config

    @nn.compact
    def __call__(self, x):
        x = x + Attention(self.config)(rms_norm(x))
        return x + FeedForward(self.config.hidden)(rms_norm(x))
