"""Patterns seen in real Flax / Equinox / JAX examples, written small for the capture tests."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import nnx


class Tower(nn.Module):
    """A Linen model built through ``functools.partial`` presets (``ResNet18 = partial(ResNet, ...)``)."""

    depths: tuple[int, ...]
    features: int = 8

    @nn.compact
    def __call__(self, x, train: bool = True):
        for depth in self.depths:
            for _ in range(depth):
                x = nn.Dense(self.features)(x)
                x = nn.BatchNorm(use_running_average=not train)(x)
        return x


TinyTower = functools.partial(Tower, depths=(1, 2))
TinerTower = functools.partial(TinyTower, features=4)


class NnxMlp(nnx.Module):
    def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(din, dout, rngs=rngs)

    def __call__(self, x):
        return self.linear(x)


NnxPreset = functools.partial(NnxMlp, 4)


class EqxMlp(eqx.Module):
    linear: eqx.nn.Linear

    def __init__(self, din: int, dout: int, *, key):
        self.linear = eqx.nn.Linear(din, dout, key=key)

    def __call__(self, x):
        return self.linear(x)


EqxPreset = functools.partial(EqxMlp, dout=2)


def make_model(features):
    """A function that returns a module, not arrays (``def model(latents): return VAE(latents)``)."""
    return Tower(depths=(1,), features=features)


class Sharded(nn.Module):
    """Parameters boxed by ``nn.with_logical_partitioning`` (flattened as ``.value``)."""

    @nn.compact
    def __call__(self, x):
        dense = nn.Dense(4, kernel_init=nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp")))
        return dense(x)


def noise(seed):
    """A key made inside the traced program (``random_seed`` carries the PRNG implementation)."""
    return jax.random.normal(jax.random.key(seed), (3,))


class Count(nnx.Variable):
    pass


class Counted(nnx.Module):
    """NNX mutations in place: a counter, batch statistics, RNG counts and a new attribute."""

    def __init__(self, d: int, *, rngs: nnx.Rngs):
        self.count = Count(jnp.array(0))
        self.linear = nnx.Linear(d, d, rngs=rngs)
        self.bn = nnx.BatchNorm(d, rngs=rngs)
        self.dropout = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        self.count[...] += 1
        y = self.dropout(self.bn(self.linear(x)))
        self.last = Count(jnp.mean(y))
        return y


class Frozen(nnx.Module):
    """Nothing changes during the call: no state outputs."""

    def __init__(self, d: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(d, d, rngs=rngs)
        self.bn = nnx.BatchNorm(d, use_running_average=True, rngs=rngs)

    def __call__(self, x):
        return self.bn(self.linear(x))


class Noisy(nn.Module):
    """Dropout and batch statistics in training mode: need ``rngs`` and ``mutable`` in the profile."""

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.BatchNorm(use_running_average=not train)(x)
        return nn.Dropout(0.5, deterministic=not train)(x)
