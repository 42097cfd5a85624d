"""Modules whose methods other than __call__ do work: their nodes belong to the module."""

import jax, jax.numpy as jnp
from flax import nnx
import equinox as eqx

class Block(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.lin = nnx.Linear(4, 4, rngs=rngs)
    def __call__(self, x):
        return jax.nn.relu(self.lin(x))
    def half(self, x):
        return self.lin(x) * 0.5

class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.blocks = nnx.List([Block(rngs) for _ in range(2)])
        self.head = nnx.Linear(4, 2, rngs=rngs)
    def __call__(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)
    def encode(self, x):
        x = self.blocks[0].half(x)
        return self.head(x)

class EBlock(eqx.Module):
    lin: eqx.nn.Linear
    def __init__(self, key):
        self.lin = eqx.nn.Linear(4, 4, key=key)
    def __call__(self, x):
        return self.lin(x)
    def half(self, x):
        return self.lin(x) * 0.5

class ENet(eqx.Module):
    blocks: list
    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.blocks = [EBlock(k1), EBlock(k2)]
    def __call__(self, x):
        for b in self.blocks:
            x = b(x)
        return x
    def encode(self, x):
        return self.blocks[1].half(x)


def net_inputs():
    return {"args": [Net(nnx.Rngs(0)), jnp.ones((3, 4))]}


def enet_inputs():
    bn_model, state = eqx.nn.make_with_state(EBatchNorm)(jax.random.key(0))
    return {"args": [ENet(jax.random.key(1)), bn_model, state, jnp.ones((5, 4))]}


class EBatchNorm(eqx.Module):
    bn: eqx.nn.BatchNorm

    def __init__(self, key):
        self.bn = eqx.nn.BatchNorm(4, axis_name="batch", mode="ema")

    def __call__(self, x, state):
        return self.bn(x, state)


def net_loss(model, x):
    return model(x).sum()


def two_models_loss(enet, bn_model, state, xs):
    ys = jax.vmap(enet)(xs)
    out, _ = jax.vmap(bn_model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(ys, state)
    return out.sum()
