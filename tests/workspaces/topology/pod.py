"""Programs compiled for TPU pods from a CPU-only machine (tests/cli/test_topology.py): the
profiles in jaxlsp.toml lay their meshes over a topology's devices."""

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def matmul(a, b):
    c = a @ b
    return jnp.tanh(c)


def replicated(w, x):
    y = x @ w
    return jnp.tanh(y)


class MLP(nnx.Module):
    """Two layers; the profile shards every kernel FSDP-style (on its input dimension)."""

    def __init__(self, rngs: nnx.Rngs):
        self.up = nnx.Linear(1024, 4096, rngs=rngs)
        self.down = nnx.Linear(4096, 1024, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.up(x))
        return self.down(h)


def fsdp_model():
    """The model with each kernel split on its first axis over the mesh the capture set (the
    profile's, over the pod): abstract, so nothing is allocated for 16 chips."""
    mesh = jax.sharding.get_mesh()
    model = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
    state = nnx.state(model)

    def place(leaf):
        spec = P("fsdp", None) if leaf.ndim == 2 else P()
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=NamedSharding(mesh, spec))

    nnx.update(model, jax.tree_util.tree_map(place, state))
    return model
