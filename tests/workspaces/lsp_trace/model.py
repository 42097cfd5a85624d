import pathlib

# A sentinel: this file exists only if user code ran (it must not before the user trusts).
pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


@jax.jit
def predict(w, x):
    h = jnp.tanh(x @ w)
    return h.sum(axis=-1)


def needs(x: jax.Array):
    return jnp.sin(x)


def bad(x):
    if x.sum() > 0:
        return x
    return -x
