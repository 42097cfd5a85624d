"""A toy run of the scanned NNX MLP (module level, no main guard)."""

import jax.numpy as jnp
from flax import nnx

from zoo.rnn import ScanMLP

model = ScanMLP(10, n_layers=3, rngs=nnx.Rngs(0))
y = model(jnp.ones((3, 10)))
print(y.shape)
