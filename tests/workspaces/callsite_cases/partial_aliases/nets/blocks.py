from functools import partial

import flax.linen as nn


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.relu(nn.Dense(4)(x))


class OtherBlock(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.tanh(nn.Dense(4)(x))


class Net(nn.Module):
    block_cls: type = OtherBlock

    @nn.compact
    def __call__(self, x):
        return self.block_cls()(x)


Small = partial(Net, block_cls=Block)
Other = partial(Net, block_cls=OtherBlock)
