"""A 50,000-equation decoder-shaped Linen model for the viewer's scale test (issue 29): 32
identical layers, each an attention-like and an MLP-like sub-module of element-wise chains."""

import flax.linen as nn
import jax
from jax import lax

LAYERS = 32
CHAIN = 780  # equations per sub-module: 32 layers x 2 sub-modules x 780 = 49,920


class Mix(nn.Module):
    smooth: bool  # tanh (the MLP) or exp (the attention): the two sub-modules differ

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = x
        for i in range(CHAIN // 3):
            y = lax.tanh(y) if self.smooth else lax.exp(y)
            y = lax.mul(y, x)
            y = lax.add(y, x) if i % 2 else lax.sub(y, x)
        return y


class Layer(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return Mix(smooth=True, name="mlp")(Mix(smooth=False, name="attn")(x))


class Decoder(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(LAYERS):
            x = Layer(name=f"layers_{i}")(x)
        return x
