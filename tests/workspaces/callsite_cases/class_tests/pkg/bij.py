import equinox as eqx
import jax.numpy as jnp


def _helper(x):
    return jnp.tanh(x) * 2


class B(eqx.Module):
    def forward(self, x):
        return _helper(x)
