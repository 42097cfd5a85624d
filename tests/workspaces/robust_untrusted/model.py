"""JAX and Flax entrypoints in a workspace nobody has trusted: discovery must stay import-free."""

import flax.linen as nn
import jax.numpy as jnp

raise SystemExit("robust-untrusted: model.py was imported")


def predict(w, x):
    return jnp.tanh(x @ w)


class MLP(nn.Module):
    features: int = 4

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features)(x)
