"""An FSDP-style Flax NNX model: every kernel sharded over the mesh axis "x" on its input dimension,
the batch split over "x" too (data parallel). XLA gathers each layer's kernel before its matmul."""

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((4,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.up = nnx.Linear(32, 64, rngs=rngs)
        self.down = nnx.Linear(64, 16, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.up(x))
        return self.down(h)


def sharded_model():
    """The model with its parameters placed FSDP-style: kernels split on their first axis."""
    model = MLP(nnx.Rngs(0))
    state = nnx.state(model)

    def place(path, leaf):
        spec = P("x", None) if leaf.ndim == 2 else P()
        return jax.device_put(leaf, NamedSharding(MESH, spec))

    nnx.update(model, jax.tree_util.tree_map_with_path(place, state))
    return model


def batch():
    x = jax.ShapeDtypeStruct((8, 32), jnp.float32, sharding=NamedSharding(MESH, P("x", None)))
    return {"args": [x], "kwargs": {}}
