"""Flax NNX's training pattern: @nnx.jit train_step(model, optimizer, x, y) updating both in place."""
import jax, jax.numpy as jnp, optax
from flax import nnx

class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(4, 8, rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.l2 = nnx.Linear(8, 2, rngs=rngs)
    def __call__(self, x):
        return self.l2(nnx.relu(self.bn(self.l1(x))))

@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return ((model(x) - y) ** 2).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss

def inputs():
    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    return {"args": [model, optimizer, jnp.ones((5, 4)), jnp.ones((5, 2))]}
