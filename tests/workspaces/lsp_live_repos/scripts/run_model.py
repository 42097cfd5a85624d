"""bonsai's tests/run_model.py: a pretrained model, a dummy input, the forward pass."""

import jax.numpy as jnp

from hub import Model, forward


def run_model():
    model = Model.from_pretrained("org/tiny-pretrained")
    dummy = jnp.ones((2, 4), dtype=jnp.float32)
    return forward(model, dummy)


if __name__ == "__main__":
    run_model()
