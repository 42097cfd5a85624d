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
