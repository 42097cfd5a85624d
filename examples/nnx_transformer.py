"""A Flax NNX transformer block: pre-norm attention and MLP with residuals."""

import jax
from flax import nnx


class FeedForward(nnx.Module):
    def __init__(self, dim: int, hidden: int, *, rngs: nnx.Rngs):
        self.up = nnx.Linear(dim, hidden, rngs=rngs)
        self.down = nnx.Linear(hidden, dim, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down(nnx.gelu(self.up(x)))


class TransformerBlock(nnx.Module):
    def __init__(self, dim: int = 64, heads: int = 4, hidden: int = 256, *, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
        self.mlp = FeedForward(dim, hidden, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))
