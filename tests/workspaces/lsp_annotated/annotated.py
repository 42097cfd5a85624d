"""Live shapes from jaxtyping annotations alone: nothing calls these functions and no profile names them."""

import jax.numpy as jnp
from jaxtyping import Array, Float


def pairwise_sq_dists(x: Float[Array, "n d"], y: Float[Array, "m d"]) -> Float[Array, "n m"]:
    diff = x[:, None, :] - y[None, :, :]
    return jnp.sum(diff**2, axis=-1)


def blocks(x: Float[Array, " n"]) -> Float[Array, "k 4"]:
    grouped = x.reshape(-1, 4)
    return jnp.tanh(grouped)


def counted(x: Float[Array, "n d"]) -> Float[Array, " d"]:
    total = jnp.zeros(int(x.shape[0]))
    return x.sum(0) + total.sum()
