"""Plain function fixtures: higher-order primitives, constants, errors."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

TABLE = np.arange(4.0, dtype=np.float32)


@jax.jit
def double(x):
    return x * 2.0


def twice(x, y):
    return double(x) + double(y)


def control(x, n: int = 3):
    y = lax.cond(x.sum() > 0, lambda a: a + 1.0, lambda a: a * 2.0, x)
    _, y = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, y))
    y = lax.fori_loop(0, n, lambda i, a: a + i, y)
    y = jax.checkpoint(lambda a: jnp.sin(a) * 2.0)(y)
    s, _ = lax.scan(lambda c, v: (c + v, None), y[0], y)
    return s


@jax.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


softplus.defjvp(lambda primals, tangents: (softplus(primals[0]), tangents[0] * jax.nn.sigmoid(primals[0])))


@jax.custom_vjp
def clip_grad(x):
    return x


clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def customs(x):
    return clip_grad(softplus(x))


def with_consts(x):
    return x + TABLE + 3.0


def concrete(x):
    if x.sum() > 0:
        return x
    return -x


def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w))


class Ops:
    @staticmethod
    def scale(x, factor: float = 2.0):
        return x * factor


def symbolic(x):
    return jnp.tanh(x).sum(axis=-1)
