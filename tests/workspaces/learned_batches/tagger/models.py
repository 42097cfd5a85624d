"""One target of each kind: they are called with NumPy int64 tokens and float64 features."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float


def score(tokens, weights):
    """Tokens looked up in ``weights``, scaled: int64 and float64 in, float32 out (x64 off)."""
    return jnp.take(weights, tokens, axis=0) * 0.5


def masked_mean(feats: Float[Array, "rows width"], mask):
    """A mean over the rows the mask keeps: its batch is the features'."""
    kept = jnp.where(mask[:, None], feats, 0.0)
    return kept.sum(axis=0) / jnp.maximum(mask.sum(), 1)


def unrolled(feats):
    """A Python loop over the rows: the number of rows must be known."""
    total = jnp.zeros(feats.shape[1:])
    for i in range(int(feats.shape[0])):
        total = total + feats[i]
    return total


class Tagger(nn.Module):
    vocab: int = 11
    width: int = 8

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab, self.width)(tokens)
        return nn.Dense(self.vocab)(x)


class Scaler(nnx.Module):
    def __init__(self, width: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(width, 4, rngs=rngs)

    def __call__(self, x):
        return self.linear(x) * 2.0


class Mixer(eqx.Module):
    weight: jax.Array

    def __init__(self, width: int, key: jax.Array):
        self.weight = jax.random.normal(key, (width, width))

    def __call__(self, x):
        return x @ self.weight + 1.0
