"""A Linen target whose import leaves a sentinel: the environment tests prove nothing ran."""

import pathlib

pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")

import flax.linen as nn  # noqa: E402


class Tiny(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(x)
