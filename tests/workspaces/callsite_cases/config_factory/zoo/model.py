import jax.numpy as jnp
from flax import nnx

from zoo.config import ModelConfig


class Model(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.block = nnx.Linear(cfg.dim, cfg.dim, rngs=rngs)
        self.out = nnx.Linear(cfg.dim, cfg.hidden, rngs=rngs)

    def __call__(self, x):
        for _ in range(self.cfg.layers):
            x = jnp.tanh(self.block(x))
        return self.out(x)
