"""A decoder-only transformer in Flax Linen with a config object, as flax/examples/lm1b does."""

from flax import linen as nn
from flax import struct
import jax.numpy as jnp


@struct.dataclass
class TransformerConfig:
    vocab_size: int
    emb_dim: int = 16
    num_heads: int = 2
    num_layers: int = 2
    mlp_dim: int = 32
    max_len: int = 64
    dropout_rate: float = 0.1
    deterministic: bool = False


class MlpBlock(nn.Module):
    config: TransformerConfig

    @nn.compact
    def __call__(self, x):
        cfg = self.config
        y = nn.Dense(cfg.mlp_dim)(x)
        y = nn.gelu(y)
        y = nn.Dropout(rate=cfg.dropout_rate)(y, deterministic=cfg.deterministic)
        return nn.Dense(x.shape[-1])(y)


class DecoderLayer(nn.Module):
    config: TransformerConfig

    @nn.compact
    def __call__(self, x):
        cfg = self.config
        y = nn.LayerNorm()(x)
        y = nn.SelfAttention(num_heads=cfg.num_heads, deterministic=cfg.deterministic, dropout_rate=cfg.dropout_rate)(y)
        x = x + y
        return x + MlpBlock(cfg)(nn.LayerNorm()(x))


class TransformerLM(nn.Module):
    config: TransformerConfig

    @nn.compact
    def __call__(self, tokens):
        cfg = self.config
        x = nn.Embed(cfg.vocab_size, cfg.emb_dim)(tokens.astype(jnp.int32))
        for _ in range(cfg.num_layers):
            x = DecoderLayer(cfg)(x)
        return nn.Dense(cfg.vocab_size)(nn.LayerNorm()(x))
