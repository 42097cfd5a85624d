"""A Flax Linen MLP whose layers differ in width, one much wider than the rest (tests of issue 28:
measured time ranks the widest layer first)."""

import flax.linen as nn


class MLP(nn.Module):
    widths: tuple[int, ...] = (256, 8192, 32, 16)

    @nn.compact
    def __call__(self, x):
        for i, width in enumerate(self.widths):
            x = nn.Dense(width)(x)
            if i < len(self.widths) - 1:
                x = nn.relu(x)
        return x


def scanned(w, x):
    """Eight steps of a tanh layer in a scan, then a readout: XLA runs the body in a while loop."""
    import jax
    import jax.numpy as jnp

    def step(h, _):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(step, x, None, length=8)
    return jnp.sin(h).sum()



def bf16_mlp(w1, w2, w3, x):
    """A plain bf16 function (issue 47): the CPU computes its dots in f32, so XLA converts every
    input and the result (``wrapped_convert`` ops with no metadata of their own)."""
    import jax

    h = jax.nn.relu(x @ w1)
    h = jax.nn.relu(h @ w2)
    return h @ w3


def abstract_inputs():
    """The scan's inputs as shapes only: enough to trace, not to run."""
    import jax
    import jax.numpy as jnp

    return {"args": [jax.ShapeDtypeStruct((8, 8), jnp.float32), jax.ShapeDtypeStruct((4, 8), jnp.float32)]}
