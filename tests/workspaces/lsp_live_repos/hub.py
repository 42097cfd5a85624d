"""Live shapes: bonsai's layout (models/dinov3): ``forward``'s only complete call site,
scripts/run_model.py, builds its model with ``Model.from_pretrained(...)``, which downloads a
checkpoint from the Hugging Face Hub there; this one writes a line to ``DOWNLOADS`` instead."""

import pathlib

import jax.numpy as jnp


class Model:
    def __init__(self, w):
        self.w = w

    @classmethod
    def from_pretrained(cls, name):
        with open(pathlib.Path(__file__).with_name("DOWNLOADS"), "a") as log:
            log.write(name + "\n")
        return cls(jnp.ones((4, 3)))


def forward(model, x):
    y = jnp.dot(x, model.w)
    return jnp.tanh(y)
