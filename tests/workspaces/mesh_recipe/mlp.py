"""An MLP that knows nothing of meshes: its recipe (jaxlsp.toml) shards its inputs over a
``data`` by ``model`` mesh of 4 virtual CPU devices, so its graph has sharded types
(``f32[8@data,64@model]``). jaxlsp's tests of meshes in recipes: tests/cli/test_mesh_recipe.py,
tests/clients/vscode/test_shardings_vscode.py."""

import jax.numpy as jnp


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"])
    return h @ params["w2"]
