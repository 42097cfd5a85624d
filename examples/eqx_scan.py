"""An Equinox recurrent model that runs its cell over a sequence with lax.scan."""

import equinox as eqx
import jax
from jax import lax
from jaxtyping import Array, Float, PRNGKeyArray


class ScanRNN(eqx.Module):
    cell: eqx.nn.GRUCell
    head: eqx.nn.Linear
    hidden: int = eqx.field(static=True)

    def __init__(self, in_size: int = 8, hidden: int = 32, out_size: int = 4, *, key: PRNGKeyArray):
        k1, k2 = jax.random.split(key)
        self.hidden = hidden
        self.cell = eqx.nn.GRUCell(in_size, hidden, key=k1)
        self.head = eqx.nn.Linear(hidden, out_size, key=k2)

    def __call__(self, xs: Float[Array, "time in_size"]) -> Float[Array, " out_size"]:
        def step(h, x):
            h = self.cell(x, h)
            return h, None

        h, _ = lax.scan(step, jax.numpy.zeros(self.hidden), xs)
        return self.head(h)
