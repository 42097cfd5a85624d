"""Layers and functions used in every way a repository calls them (one static form each)."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx


def project(x, w):
    return jnp.dot(x, w)


def lookup(table, ids):
    return jnp.take(table, ids, axis=0)


def half_precision(x):
    return jnp.tanh(x)


def with_numpy(x, noise):
    return jnp.add(x, noise)


def classify_loss(model, x, labels):
    logits = model(x)
    return jnp.mean((logits - labels) ** 2)


class Dropper(nn.Module):
    rate: float = 0.5

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dense(4)(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        return nn.Dropout(self.rate, deterministic=not train)(x)


class VAE(nn.Module):
    latents: int

    def setup(self):
        self.encoder = nn.Dense(self.latents)
        self.decoder = nn.Dense(6)

    def encode(self, x):
        return self.encoder(x)

    def __call__(self, x):
        return self.decoder(self.encode(x))


class Scale(nn.Module):
    factor: float

    @nn.compact
    def __call__(self, x):
        return x * self.factor


class Stack(nn.Module):
    layers: list
    activation: object = nn.relu

    @nn.compact
    def __call__(self, x, *, deterministic: bool = True):
        for layer in self.layers:
            x = self.activation(layer(x))
        return x


class Classifier(nnx.Module):
    def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(din, dout, rngs=rngs)

    def __call__(self, x):
        return self.linear(x)


class Codec(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.inner = nnx.Linear(dim, 2, rngs=rngs)

    def encode(self, x):
        return self.inner(x)


class Mixer(eqx.Module):
    weight: jax.Array

    def __init__(self, size: int, key):
        self.weight = jax.random.normal(key, (size, size))

    def __call__(self, x):
        return self.weight @ x
