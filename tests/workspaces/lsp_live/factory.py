"""Live shapes: a zero-argument factory that returns a Linen module (flaxformer's tests have dozens,
``make_mlp1``...): not a program to trace, so not live, and never an error on open."""

import flax.linen as nn

KERNEL_INIT = nn.initializers.lecun_normal  # called in make_head: a live trace runs no top-level call


class Head(nn.Module):
    kernel_init: nn.initializers.Initializer = nn.initializers.zeros

    @nn.compact
    def __call__(self, x):
        return nn.Dense(4, kernel_init=self.kernel_init)(x)


def make_head():
    return Head(kernel_init=KERNEL_INIT())
