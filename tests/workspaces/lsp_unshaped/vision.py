"""Body lines whose work happens in helpers of the same file (issue 46.5), and lines without a
shape: a branch not taken, a Python-only line, a target with no inputs, a target that fails."""

import jax.numpy as jnp


def _block(x, w):
    h = x @ w
    return jnp.tanh(h)


def model(x):
    w = jnp.ones((x.shape[-1], x.shape[-1]))
    x = _block(x, w)
    y = _block(x, w[:, :4])
    if x.ndim > 5:
        y = jnp.sum(y * 2.0)
    n = x.shape[0]
    return y + n


def head(x):
    return jnp.mean(x, axis=-1)


def broken(x):
    return x @ jnp.ones((3, 3))
