"""A mix of module classes, JAX functions, plain classes and JAX-free functions."""

import dataclasses
from functools import partial

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx


class Dense(nn.Module):
    features: int = 8
    use_bias: bool = True

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features, use_bias=self.use_bias)(x)


class Config:
    """A plain class: no lens."""

    depth: int = 2


@jax.jit
def scale(x):
    return x * 2.0


def helper(n: int) -> int:
    """No JAX at all: no lens."""
    total = 0
    for i in range(n):
        total += i
    return total


class Counter(nnx.Variable):
    """An NNX variable type, not a module: no lens."""


class Block(nnx.Module):
    def __init__(self, width: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(width, width, rngs=rngs)

    def __call__(self, x):
        y = self.linear(x)
        z = jnp.tanh(y)
        return x + z


def norm(x):  # ‖x‖ in 𝔽
    return jnp.sqrt(jnp.sum(x * x))


@dataclasses.dataclass
class Settings:
    lr: float = 1e-3


class Head(eqx.Module):
    weight: jax.Array

    def __call__(self, x):
        return self.weight @ x


@partial(jax.jit, static_argnums=1)
def power(x, n):
    return x**n


def describe() -> str:
    return "jax.numpy is mentioned only in this string"


def keys(key, steps: int):
    """A driver: JAX only as plumbing inside a loop; reported by discover, no lens."""
    for _ in range(steps):
        key, sub = jax.random.split(key)
        print(sub)
    return key


class Tower(nn.Module):
    class Layer(nn.Module):
        width: int = 4

        def __call__(self, x):
            return nn.relu(x)

    def __call__(self, x):
        return self.Layer()(x)
