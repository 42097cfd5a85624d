"""The workspace's own tests: inputs built in fixtures, nothing a static reader could see."""

import jax
import jax.numpy as jnp
from flax import nnx

from tinylm.eqx_cell import Recurrent
from tinylm.model import Transformer
from tinylm.nnx_mlp import MLP


def test_transformer(config, tokens, key):
    model = Transformer(config)
    variables = model.init(key, tokens)
    assert model.apply(variables, tokens).shape == (2, 8, 64)


def test_mlp():
    model = MLP(4, 8, rngs=nnx.Rngs(0))
    assert model(jnp.ones((5, 4))).shape == (5, 3)


def test_recurrent(key):
    model = Recurrent(6, key)
    assert model(jnp.ones((3, 6))).shape == (6,)
