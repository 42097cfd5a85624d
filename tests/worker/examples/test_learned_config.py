"""A learned call is written as JAX saw it (worker/examples/learned.py, issue 56.8): NumPy
arrays as the types JAX converts them to under the call's x64 setting, that setting itself, the
mesh the call ran under with each array's split over it, and what a recipe cannot say yet (a
default matmul precision) kept beside the call."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")


def _target(x: Any, y: Any) -> Any:
    return x


def _table(*args: Any) -> dict[str, Any] | None:
    from jaxlsp.worker.examples import learned
    from jaxlsp.worker.examples.signatures import abstract

    return learned.profile_table("function", _target, None, abstract(list(args)), {}, {}, __file__, "_target")


def test_numpy_64_bit_arrays_are_what_jax_computes_with_under_x64_off() -> None:
    assert not jax.config.jax_enable_x64
    table = _table(np.zeros((2, 3), np.int64), np.ones((4,), np.float64))
    assert table == {
        "kind": "function",
        "inputs": {"args": [{"kind": "array", "shape": [2, 3], "dtype": "int32"}, {"kind": "array", "shape": [4]}]},
    }  # no x64: the call ran without it


def test_a_call_under_x64_keeps_its_64_bit_types_and_says_x64(x64: None) -> None:
    table = _table(np.zeros((2, 3), np.int64), np.ones((4,), np.float32))
    assert table is not None and table["x64"] is True
    assert table["inputs"]["args"] == [
        {"kind": "array", "shape": [2, 3], "dtype": "int64"},
        {"kind": "array", "shape": [4]},
    ]


def test_the_mesh_and_the_arrays_split_over_it_are_written_and_the_precision_kept_beside() -> None:
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxlsp.worker.examples import learned

    mesh = jax.make_mesh((1,), ("data",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        x = jax.device_put(np.ones((4, 3), np.float32), NamedSharding(mesh, P("data")))
        table = _table(x, np.ones((2,), np.float32))
        config = learned.run_config()
    assert table is not None and table["mesh"] == {"axes": {"data": 1}}
    assert table["inputs"]["args"] == [
        {"kind": "array", "shape": [4, 3], "sharding": ["data"]},
        {"kind": "array", "shape": [2]},
    ]
    assert config == {"x64": False, "mesh": {"axes": {"data": 1}}}
    with jax.default_matmul_precision("highest"):
        assert learned.run_config() == {"x64": False, "matmulPrecision": "highest"}
    assert "mesh" not in (_table(np.ones((2,), np.float32)) or {})  # none outside the mesh
