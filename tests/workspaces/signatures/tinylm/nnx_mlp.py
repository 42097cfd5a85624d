"""An NNX model whose layer only it constructs."""

import jax
from flax import nnx


class Layer(nnx.Module):
    def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(din, dout, rngs=rngs)

    def __call__(self, x):
        return jax.nn.relu(self.linear(x))


class MLP(nnx.Module):
    def __init__(self, din: int, width: int, *, rngs: nnx.Rngs):
        self.first = Layer(din, width, rngs=rngs)
        self.second = Layer(width, 3, rngs=rngs)

    def __call__(self, x):
        return self.second(self.first(x))
