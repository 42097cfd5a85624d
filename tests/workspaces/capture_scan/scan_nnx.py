"""NNX scan-over-layers fixture: blocks stacked with nnx.vmap, applied with nnx.scan."""

from flax import nnx


class Cell(nnx.Module):
    def __init__(self, width: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(width, width, rngs=rngs)
        self.bn = nnx.BatchNorm(width, rngs=rngs)

    def __call__(self, h):
        return nnx.relu(self.bn(self.linear(h)))


class StackedNet(nnx.Module):
    def __init__(self, width: int = 6, depth: int = 3, *, rngs: nnx.Rngs):
        self.depth = depth

        @nnx.split_rngs(splits=depth)
        @nnx.vmap(in_axes=(0,), out_axes=0, axis_size=depth)
        def make_cells(rngs: nnx.Rngs) -> Cell:
            return Cell(width, rngs=rngs)

        self.blocks = make_cells(rngs)
        self.readout = nnx.Linear(width, 2, rngs=rngs)

    def __call__(self, h):
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def step(carry, cell: Cell):
            return cell(carry)

        return self.readout(step(h, self.blocks))
