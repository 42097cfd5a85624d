import unittest

import jax
import jax.numpy as jnp
from flax import nnx

from zoo import config as config_lib
from zoo import model as model_lib


class ModelTest(unittest.TestCase):
    def setUp(self):
        self.cfg = config_lib.ModelConfig.base_1b()
        self.model = model_lib.Model(self.cfg, rngs=nnx.Rngs(0))

    def test_forward(self):
        x = jax.random.normal(jax.random.key(0), (2, self.cfg.dim))
        self.model(x)
