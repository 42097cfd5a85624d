"""An Equinox MLP built from eqx.nn.Linear layers."""

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray


class MLP(eqx.Module):
    layers: list[eqx.nn.Linear]

    def __init__(self, in_size: int, out_size: int, width: int = 64, *, key: PRNGKeyArray):
        k1, k2 = jax.random.split(key)
        self.layers = [eqx.nn.Linear(in_size, width, key=k1), eqx.nn.Linear(width, out_size, key=k2)]

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        x = jax.nn.relu(self.layers[0](x))
        return self.layers[1](x)


@eqx.filter_jit
def batched_loss(model: MLP, x: Float[Array, "batch in_size"], y: Float[Array, "batch out_size"]):
    pred = jax.vmap(model)(x)
    return ((pred - y) ** 2).mean()
