"""Programs for 4 virtual CPU devices: XLA inserts their collectives (tests/capture/test_compiled.py)."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((4,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


def matmul(a, b):
    c = a @ b
    return jnp.tanh(c)


def contracting_inputs():
    """An auto-sharded matmul whose contracting axis is split over the mesh."""
    a = jax.ShapeDtypeStruct((8, 64), jnp.float32, sharding=NamedSharding(MESH, P(None, "x")))
    b = jax.ShapeDtypeStruct((64, 16), jnp.float32, sharding=NamedSharding(MESH, P("x", None)))
    return {"args": [a, b], "kwargs": {}}


def summed(x):
    def body(block):
        return jax.lax.psum(jnp.sin(block) * 2.0, "x")

    return jax.shard_map(body, mesh=MESH, in_specs=P("x"), out_specs=P())(x)
