"""Targets of the values-run tests: one of each kind, control flow, a NaN, custom rules, impurity."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jax.nn.relu(h @ params["w2"]).mean(axis=-1)


class LinenMLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(6)(x)
        x = nn.relu(x)
        return nn.Dense(2)(x)


class NNXBlock(nnx.Module):
    def __init__(self, d: int = 4, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(d, d, rngs=rngs)
        self.norm = nnx.LayerNorm(d, rngs=rngs)

    def __call__(self, x):
        return self.norm(x + nnx.gelu(self.linear(x)))


class EqxNet(eqx.Module):
    first: eqx.nn.Linear
    second: eqx.nn.Linear

    def __init__(self, *, key):
        k1, k2 = jax.random.split(key)
        self.first = eqx.nn.Linear(3, 5, key=k1)
        self.second = eqx.nn.Linear(5, 2, key=k2)

    def __call__(self, x):
        return self.second(jax.nn.softplus(self.first(x)))


def branchy(x):
    return lax.cond(x.sum() > 0, lambda a: jnp.exp(a), lambda a: jnp.sin(a) * 2.0, x)


def blowup(x):
    def step(c, _):
        c = c - 1.0
        return c, jnp.sqrt(c)

    _, roots = lax.scan(step, x, None, length=9)
    return roots


@jax.custom_vjp
def clipped(x):
    return jnp.tanh(x) * 3.0


clipped.defvjp(lambda x: (clipped(x), x), lambda x, g: (jnp.clip(g, -1.0, 1.0),))


@jax.custom_jvp
def smooth(x):
    return jnp.log1p(jnp.exp(x))


smooth.defjvp(lambda primals, tangents: (smooth(primals[0]), tangents[0] * jax.nn.sigmoid(primals[0])))


def customs(x):
    return clipped(smooth(x) - 1.0)


CALLS = [0]


def impure(x):
    CALLS[0] += 1  # a Python counter baked into the trace: a direct call scales by another number
    return x * float(CALLS[0])


def called_back(x):
    y = jax.pure_callback(lambda a: a * 2.0, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return y + 1.0


def forever(x):
    return lax.while_loop(lambda c: c[0] >= 0, lambda c: (c[0] + 1, c[1] * 1.0), (0, x))[1]


def huge(x):
    return jnp.zeros((1 << 30,), jnp.float32) + x[0]


def steady(x):
    # Values that stay the same in every iteration (a constant flag, an unchanged carry): their
    # histogram range over the iterations is a single point.
    def step(c, _):
        return c, (jnp.ones_like(c) > 0, c * 1.0)

    return lax.scan(step, x, None, length=5)[1]


def scattered(x):
    # A scatter-add (as an embedding's gradient is): its combiner body runs inside the primitive.
    return jnp.zeros(5).at[jnp.array([0, 2, 2])].add(x)


class Counted(nn.Module):
    """A call counter and batch statistics: state inputs whose updated outputs have their labels."""

    @nn.compact
    def __call__(self, x):
        calls = self.variable("counter", "calls", lambda: jnp.zeros((), jnp.int32))
        calls.value += 1
        return nn.BatchNorm(use_running_average=False)(x)


def halved(x):
    return x.astype(jnp.bfloat16) / 2
