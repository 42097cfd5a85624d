"""A decoder-only transformer language model in Flax Linen with a configurable depth: the targets
of the scale benchmark (benchmarks/scale.py), shaped as real LLMs are (RMSNorm, rotary
embeddings, grouped-query causal attention, a SwiGLU MLP, tied-free logits) but narrow, so that
the number of equations, not the arithmetic, sets the cost of a trace.

- ``LM(depth=N)``: N blocks unrolled (one module, ``Block_0`` ... ``Block_{N-1}``, per layer);
- ``ScannedLM(depth=N, repeats=R)``: ``nn.scan`` over R repetitions of a stage of N unrolled blocks
  (the layers-scanned form of large models, whose equations sit inside the scan's body).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


class RMSNorm(nn.Module):
    eps: float = 1e-6

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", nn.initializers.ones, (x.shape[-1],))
        var = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(var + self.eps) * scale


def rotary(x: jax.Array, positions: jax.Array) -> jax.Array:
    """Rotary position embedding of ``x`` [batch, seq, heads, head_dim]."""
    half = x.shape[-1] // 2
    freq = 1.0 / (10_000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    angle = positions[:, :, None, None] * freq
    sin, cos = jnp.sin(angle), jnp.cos(angle)
    a, b = x[..., :half], x[..., half:]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


class Attention(nn.Module):
    dim: int
    heads: int
    kv_heads: int

    @nn.compact
    def __call__(self, x: jax.Array, positions: jax.Array) -> jax.Array:
        head_dim = self.dim // self.heads
        batch, seq, _ = x.shape
        q = nn.Dense(self.heads * head_dim, use_bias=False, name="q_proj")(x)
        k = nn.Dense(self.kv_heads * head_dim, use_bias=False, name="k_proj")(x)
        v = nn.Dense(self.kv_heads * head_dim, use_bias=False, name="v_proj")(x)
        q = rotary(q.reshape(batch, seq, self.heads, head_dim), positions)
        k = rotary(k.reshape(batch, seq, self.kv_heads, head_dim), positions)
        v = v.reshape(batch, seq, self.kv_heads, head_dim)
        repeat = self.heads // self.kv_heads
        k, v = jnp.repeat(k, repeat, axis=2), jnp.repeat(v, repeat, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(head_dim).astype(x.dtype)
        mask = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        scores = jnp.where(mask, scores, jnp.finfo(x.dtype).min)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
        return nn.Dense(self.dim, use_bias=False, name="o_proj")(out.reshape(batch, seq, -1))


class Block(nn.Module):
    dim: int
    heads: int
    kv_heads: int
    hidden: int

    @nn.compact
    def __call__(self, x: jax.Array, positions: jax.Array) -> jax.Array:
        x = x + Attention(self.dim, self.heads, self.kv_heads)(RMSNorm()(x), positions)
        h = RMSNorm()(x)
        gate = nn.Dense(self.hidden, use_bias=False, name="gate_proj")(h)
        up = nn.Dense(self.hidden, use_bias=False, name="up_proj")(h)
        return x + nn.Dense(self.dim, use_bias=False, name="down_proj")(nn.silu(gate) * up)


class LM(nn.Module):
    depth: int = 4
    vocab: int = 512
    dim: int = 64
    heads: int = 4
    kv_heads: int = 2
    hidden: int = 128

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        positions = jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.float32), tokens.shape)
        x = nn.Embed(self.vocab, self.dim)(tokens)
        for _ in range(self.depth):
            x = Block(self.dim, self.heads, self.kv_heads, self.hidden)(x, positions)
        return nn.Dense(self.vocab, use_bias=False, name="lm_head")(RMSNorm()(x))


class Stage(nn.Module):
    depth: int
    dim: int
    heads: int
    kv_heads: int
    hidden: int

    @nn.compact
    def __call__(self, x: jax.Array, positions: jax.Array) -> tuple[jax.Array, None]:
        for _ in range(self.depth):
            x = Block(self.dim, self.heads, self.kv_heads, self.hidden)(x, positions)
        return x, None


class ScannedLM(nn.Module):
    depth: int = 4
    repeats: int = 2
    vocab: int = 512
    dim: int = 64
    heads: int = 4
    kv_heads: int = 2
    hidden: int = 128

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        positions = jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.float32), tokens.shape)
        x = nn.Embed(self.vocab, self.dim)(tokens)
        stages = nn.scan(
            Stage,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=nn.broadcast,
            length=self.repeats,
        )
        x, _ = stages(self.depth, self.dim, self.heads, self.kv_heads, self.hidden, name="stages")(x, positions)
        return nn.Dense(self.vocab, use_bias=False, name="lm_head")(RMSNorm()(x))
