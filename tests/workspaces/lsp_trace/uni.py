import jax.numpy as jnp


def f(x):
    s = "𝜆é"; y = jnp.sin(x)  # noqa: E702
    return y * len(s)
