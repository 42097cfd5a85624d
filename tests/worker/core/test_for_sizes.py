"""A shape error of symbolic dimensions says for which sizes the line works (worker/core/failures.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from jaxlsp.worker.core.failures import first_paragraph


def _error(f: object, shape: str) -> BaseException:
    x = jax.ShapeDtypeStruct(jax.export.symbolic_shape(shape), jnp.float32)
    with pytest.raises(Exception) as caught:
        jax.make_jaxpr(f)(x)  # type: ignore[arg-type]
    return caught.value


def test_a_reshape_that_needs_a_multiple_says_so() -> None:
    said = first_paragraph(_error(lambda x: x.reshape(-1, 4), "n"))
    assert said.startswith("InconclusiveDimensionOperation: Cannot divide evenly the sizes of shapes (n,) and (-1, 4)")
    assert said.endswith("(this line works only for the sizes where n is a multiple of 4; it fails for the others)")
    both = first_paragraph(_error(lambda x: x.reshape(-1, 3), "n, d"))
    assert "where d*n is a multiple of 3" in both
    split = first_paragraph(_error(lambda x: jnp.split(x, 2), "n"))
    assert "where n is a multiple of 2" in split


def test_other_errors_are_left_as_they_are() -> None:
    said = first_paragraph(_error(lambda x: x + jnp.ones(5), "n"))
    assert said == "TypeError: add got incompatible shapes for broadcasting: (n,), (5,)."
    assert "multiple" not in first_paragraph(ValueError("expected mod(n, 4) == 1"))  # the user's own words
