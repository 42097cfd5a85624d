import flax.linen as nn


class Base(nn.Module):
    width: int = 4

    def __call__(self, x):
        return x
