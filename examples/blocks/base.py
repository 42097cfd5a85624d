from flax import linen as nn


class ResidualBlock(nn.Module):
    width: int = 64

    @nn.compact
    def __call__(self, x):
        return x + nn.Dense(self.width)(nn.relu(x))
