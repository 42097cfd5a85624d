"""Imported by a trace whose inputs come from here: its top level leaves SIDE in the project."""

import pathlib

import jax.numpy as jnp

from blocks import apply

pathlib.Path(__file__).parents[1].joinpath("SIDE").write_text("test_blocks was imported\n")


class Doubler:
    def __call__(self, x):
        return jnp.concatenate([x, x], axis=-1)


def test_apply():
    assert apply(Doubler(), jnp.ones((3, 5))).shape == (10,)
