"""An explicitly sharded MLP on a mesh of 4 devices, and two programs whose shardings disagree
(jaxlsp's tests of shardings in the graph: tests/cli/test_shardings_cli.py, tests/server/test_shardings.py)."""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Explicit,))
jax.set_mesh(mesh)


def batch():
    """The MLP's inputs: replicated weights, a batch split over ``x``."""
    weights = {"w1": jax.ShapeDtypeStruct((16, 64), jnp.float32), "w2": jax.ShapeDtypeStruct((64, 4), jnp.float32)}
    x = jax.ShapeDtypeStruct((8, 16), jnp.float32, sharding=NamedSharding(mesh, P("x", None)))
    return {"args": [weights, x]}


def centred(v):
    return v - jax.lax.pmean(v, "x")


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"])
    h = jax.sharding.reshard(h, P("x", None))
    y = h @ params["w2"]
    return jax.shard_map(centred, in_specs=P("x", None), out_specs=P("x", None))(y)


def mismatch(a, b):
    a = jax.sharding.reshard(a, P("x", None))
    b = jax.sharding.reshard(b, P(None, "x"))
    return a + b


def joined(a, b):
    a = jax.sharding.reshard(a, P("x", None))
    b = jax.sharding.reshard(b, P(None, "x"))
    return jnp.concatenate([a, b])
