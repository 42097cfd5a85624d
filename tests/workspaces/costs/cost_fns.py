"""Functions whose costs can be counted by hand (tests/worker/program/test_costs.py)."""

import jax
import jax.numpy as jnp


def matmul(x, w):
    return x @ w


def conv(x, k):
    return jax.lax.conv_general_dilated(x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def elementwise(x, y):
    return jnp.tanh(x + y) * y


def scanned(x, w):
    def body(carry, _):
        return jnp.tanh(carry @ w), None

    return jax.lax.scan(body, x, None, length=7)[0]


def counted_while(x, w):
    def body(state):
        i, c = state
        return i + 1, c @ w

    return jax.lax.while_loop(lambda s: s[0] < 5, body, (0, x))[1]


def data_while(x, w):
    def body(state):
        return state @ w

    return jax.lax.while_loop(lambda s: jnp.sum(s) < 100.0, body, x)


def branches(x, w):
    return jax.lax.cond(jnp.sum(x) > 0, lambda v: (v @ w) @ w, lambda v: v + 1.0, x)


def chain(x):
    a = x * 2.0
    b = a + 1.0
    c = jnp.sin(b)
    return c * 3.0


def mixed(x, w):
    h = (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32)
    return jnp.dot(h, w.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST)
