"""An NNX mean function that keeps its constant as a plain array attribute, not in a Variable
(GPJax's ``Constant`` mean)."""

import jax.numpy as jnp
from flax import nnx
from jax import Array


class Constant(nnx.Module):
    def __init__(self, constant: float | Array = 0.0) -> None:
        self.constant = jnp.array(constant)

    def __call__(self, x: Array) -> Array:
        return jnp.ones((x.shape[0], 1)) * self.constant
