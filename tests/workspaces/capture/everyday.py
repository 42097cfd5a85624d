"""Everyday JAX that the capture once misreported (issue 14): keys, coverage, presentation."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import flax.linen as nn
from flax import nnx
from jax import lax


def split_step(key, x):
    key, sub = jax.random.split(key)
    return key, x + jax.random.normal(sub, x.shape)


def legacy_noise(key, x):
    return x + jax.random.normal(key, x.shape)


class Splitter(eqx.Module):
    w: jax.Array
    b: jax.Array

    def __init__(self, d, key):
        k1, k2 = jax.random.split(key)
        self.w = jax.random.normal(k1, (d, d))
        self.b = jax.random.normal(k2, (d,))

    def __call__(self, x):
        return self.w @ x + self.b


class Dropper(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.lin = nnx.Linear(4, 4, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.lin(x))


@nnx.jit
def train_step(model, x):
    def loss(m):
        return m(x).sum()

    value, grads = nnx.value_and_grad(loss)(model)
    return value


def make_dropper():
    return Dropper(nnx.Rngs(0))


def scaled(x, factor):
    return x * factor


def make_scaled():
    return functools.partial(scaled, factor=3.0)


def on_cpu(x):
    return jax.device_put(x, jax.devices("cpu")[0]) * 2.0


def by_size(x):
    return x.sum(axis=0) * x.shape[0]


def debugged(x):
    jax.debug.print("x = {}", x)
    return x + 1.0


def calls_back(x):
    y = jax.pure_callback(lambda a: np.sin(a), jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return y * 2.0


def relu_twice(x):
    return jax.nn.relu(x) + jax.nn.relu(-x)


@jax.jit
def attention(q, k):
    return jax.nn.softmax(q @ k.T, axis=-1)


def attend(q, k):
    return attention(q, k) * 2.0


def loops(x):
    s, _ = lax.scan(lambda c, v: (c * v + 1.0, None), x[0], x)
    _, t = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, s))
    return t


def mean_abs(x):
    return jnp.mean(jnp.abs(x))


class NoisyDense(nn.Module):
    """A Linen module with a key among its fields (kept as given, so made a real key)."""

    key: jax.Array
    features: int = 3

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features)(x) + jax.random.normal(self.key, (self.features,))


def make_model_and_optimizer():
    import optax

    return nnx.ModelAndOptimizer(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), optax.sgd(0.1), wrt=nnx.Param)


@nnx.jit
def optimizer_step(optimizer, x):
    def loss(model):
        return model(x).sum()

    value, grads = nnx.value_and_grad(loss)(optimizer.model)
    optimizer.update(grads)
    return value
