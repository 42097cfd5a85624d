import flax.linen as nn


class Small(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(x)


class Big(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(8)(x)
