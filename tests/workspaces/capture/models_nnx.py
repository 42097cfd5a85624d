"""NNX fixtures for the capture tests."""

from flax import nnx


class Block(nnx.Module):
    def __init__(self, d: int, *, rngs: nnx.Rngs):
        self.attn = nnx.Linear(d, d, rngs=rngs)
        self.norm = nnx.LayerNorm(d, rngs=rngs)

    def __call__(self, x):
        return self.norm(x + nnx.relu(self.attn(x)))


class Tower(nnx.Module):
    def __init__(self, d: int = 8, depth: int = 2, *, rngs: nnx.Rngs):
        self.blocks = nnx.List([Block(d, rngs=rngs) for _ in range(depth)])
        self.head = nnx.Linear(d, 3, rngs=rngs)

    def __call__(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class Stateful(nnx.Module):
    """A call that updates state: batch statistics in training mode and Dropout's RNG count."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.lin = nnx.Linear(3, 4, rngs=rngs)
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.bn(self.lin(x)))
