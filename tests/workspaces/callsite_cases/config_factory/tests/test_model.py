import jax.numpy as jnp
from flax import nnx

from zoo.config import ModelConfig
from zoo.model import Model


def test_small():
    cfg = ModelConfig.small()
    model = Model(cfg, rngs=nnx.Rngs(0))
    assert model(jnp.ones((2, 4))).shape == (2, 8)


def test_base():
    model = Model(ModelConfig.base_1b(layers=1), rngs=nnx.Rngs(0))
    assert model(jnp.ones((2, 16))).shape == (2, 32)
