"""A concrete run on an accelerator draws its weights and inputs on the host and moves them to the
chip in one transfer (worker/process/trace.py): which runs do, and that the move keeps every leaf
that is not a JAX array as it was. The chip itself is measured by ``benchmarks/tpu.sh`` (55.4)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlsp.worker.process import trace


def test_host_init_only_for_a_concrete_run_on_an_accelerator_without_a_mesh() -> None:
    chip: Any = SimpleNamespace(platform="tpu")
    cpu = jax.devices("cpu")[0]
    assert trace._host_init(True, chip, None)
    assert not trace._host_init(False, chip, None)  # an abstract trace makes no arrays
    assert not trace._host_init(True, cpu, None)  # the host already
    assert not trace._host_init(True, None, None)  # the default device: the CPU here
    assert not trace._host_init(True, chip, object())  # a mesh's shardings place its inputs


def test_moved_puts_every_array_on_the_device_and_keeps_other_leaves() -> None:
    device = jax.devices("cpu")[0]
    host = np.arange(3.0)
    tree: Any = ((jnp.ones((2, 3)), {"w": jnp.zeros(4, jnp.int32), "n": 3}), host, None, ["tag", jnp.float32(2.0)])
    moved: Any = trace._moved(tree, device)
    (args, params), numpy_leaf, nothing, extra = moved
    assert args.devices() == {device} and params["w"].devices() == {device}
    assert params["w"].dtype == jnp.int32 and params["n"] == 3
    assert numpy_leaf is host and nothing is None and extra[0] == "tag"
    assert str(jax.tree_util.tree_structure(moved)) == str(jax.tree_util.tree_structure(tree))
    np.testing.assert_array_equal(np.asarray(args), np.ones((2, 3)))
    assert float(extra[1]) == 2.0
