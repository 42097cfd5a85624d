import flax.linen as nn
import jax.numpy as jnp


class M(nn.Module):
    @nn.compact
    def __call__(self, x, strict: bool = False):
        if strict:
            raise ValueError("strict is not supported")
        return nn.Dense(3)(x)


def scale(x, factor=2.0):
    if factor <= 0:
        raise ValueError("factor must be positive")
    return jnp.sin(x) * factor
