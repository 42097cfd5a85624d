"""A Linen stack of six equal blocks: the last five repeat the first (tests/server/test_replay_setting.py)."""

import flax.linen as nn
import jax
import jax.numpy as jnp


class Block(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(self.width, name="up")(nn.LayerNorm()(x))
        h = jax.nn.gelu(h) * jnp.tanh(h) + jnp.sin(h)
        return x + nn.Dense(x.shape[-1], name="down")(h)


class Stack(nn.Module):
    depth: int = 6

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for _ in range(self.depth):
            x = Block(16)(x)
        return nn.Dense(3)(x)
