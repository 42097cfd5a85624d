"""A 12-layer, d=256 Flax Linen transformer language model: the capture benchmark's target."""

import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    dim: int = 256
    heads: int = 8
    hidden: int = 1024

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2]))
        x = x + nn.SelfAttention(num_heads=self.heads)(nn.LayerNorm()(x), mask=mask)
        h = nn.Dense(self.hidden)(nn.LayerNorm()(x))
        return x + nn.Dense(self.dim)(nn.gelu(h))


class Transformer(nn.Module):
    vocab: int = 8192
    dim: int = 256
    depth: int = 12

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.dim)(tokens)
        for _ in range(self.depth):
            x = Block(self.dim)(x)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))
