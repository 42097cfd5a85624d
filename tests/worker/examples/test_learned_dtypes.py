"""Dtypes in a learned call (worker/examples/learned.py): an array's ``.dtype`` handed on as an
argument (interpax's ``_cubic2(x, f, axis, bc, dtype)``) and the 64-bit types a recipe can spell
(complex128, uint64) are written, not given up as unspellable."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")


def _target(x: Any, dtype: Any) -> Any:
    return x.astype(dtype)


def _table(*args: Any) -> dict[str, Any] | None:
    from jaxlsp.worker.examples import learned
    from jaxlsp.worker.examples.signatures import abstract

    return learned.profile_table("function", _target, None, abstract(list(args)), {}, {}, __file__, "_target")


def test_an_arrays_dtype_passed_as_an_argument_is_written_as_its_jax_numpy_name() -> None:
    x = jax.numpy.ones((3,), jax.numpy.float32)
    table = _table(x, x.dtype)  # a NumPy 2 dtype object: its class is Float32DType
    assert table is not None
    assert table["inputs"]["args"] == [{"kind": "array", "shape": [3]}, {"ref": "jax.numpy:float32"}]
    table = _table(x, np.dtype("int8"))
    assert table is not None and table["inputs"]["args"][1] == {"ref": "jax.numpy:int8"}


@pytest.mark.parametrize("dtype", ["complex128", "uint64"])
def test_a_64_bit_type_every_recipe_can_spell_is_written_with_x64(x64: None, dtype: str) -> None:
    table = _table(np.zeros((2, 3), dtype), np.dtype(dtype))
    assert table is not None and table["x64"] is True
    assert table["inputs"]["args"] == [
        {"kind": "array", "shape": [2, 3], "dtype": dtype},
        {"ref": f"jax.numpy:{dtype}"},
    ]
