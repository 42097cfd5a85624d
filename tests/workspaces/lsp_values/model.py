import jax
import jax.numpy as jnp


def blowup(x):
    def step(c, _):
        c = c - 1.0
        return c, jnp.sqrt(c)

    _, roots = jax.lax.scan(step, x, None, length=8)
    return roots.sum(axis=0)


def predict(w, x):
    return jnp.tanh(x @ w).sum(axis=-1)


def anysize(x):
    return jnp.exp(x).sum()
