"""Annotated, called by nothing, traced on open: ``roots`` checks its argument's values (a traced
array in an ``if``: its trace fails, quoting ``shape bool[]``); ``clipped`` has a branch a trace
with ``scale`` 1.0 never takes."""

import jax.numpy as jnp
from jaxtyping import Array, Float


def roots(x: Float[Array, "n"]) -> Float[Array, "n"]:
    if jnp.any(x < 0):
        raise ValueError("x must not be negative")
    return jnp.sqrt(x)


def clipped(x: Float[Array, "n"], scale: float = 1.0) -> Float[Array, "n"]:
    if scale > 2.0:
        x = jnp.tanh(x)
    return jnp.clip(x * scale, 0.0, 1.0)
