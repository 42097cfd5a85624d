import flax.linen as nn


class Wide(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(16)(x)
