"""A mesh of Auto axes: the types carry no split (XLA picks it when compiling), so the graph has
the mesh, no value sharding, and ``with_sharding_constraint`` says on its node what it asks for."""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

jax.set_mesh(jax.make_mesh((4,), ("d",), axis_types=(AxisType.Auto,)))


def step(x):
    y = jnp.sin(x) * 2.0
    return jax.lax.with_sharding_constraint(y, P("d", None))
