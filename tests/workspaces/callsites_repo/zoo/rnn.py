"""Recurrent and scanned models in Flax NNX."""

from flax import nnx
import jax
import jax.numpy as jnp


class GRUCell(nnx.Module):
    def __init__(self, in_features: int, hidden_features: int, *, rngs: nnx.Rngs):
        self.hidden_features = hidden_features
        self.gates = nnx.Linear(in_features + hidden_features, 2 * hidden_features, rngs=rngs)
        self.candidate = nnx.Linear(in_features + hidden_features, hidden_features, rngs=rngs)

    def __call__(self, carry, x):
        xh = jnp.concatenate([x, carry], axis=-1)
        r, z = jnp.split(jax.nn.sigmoid(self.gates(xh)), 2, axis=-1)
        c = jnp.tanh(self.candidate(jnp.concatenate([x, r * carry], axis=-1)))
        carry = (1 - z) * carry + z * c
        return carry, carry


class Block(nnx.Module):
    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(dim, dim, rngs=rngs)

    def __call__(self, x):
        return nnx.relu(self.linear(x))


class ScanMLP(nnx.Module):
    def __init__(self, dim: int, *, n_layers: int, rngs: nnx.Rngs):
        self.layers = nnx.List([Block(dim, rngs=rngs) for _ in range(n_layers)])

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
