"""A shape error of symbolic dimensions says for which sizes the line works (worker/core/failures.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from jaxlsp.worker.core.failures import first_paragraph, symbolic_failure


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


def test_a_dimension_that_cannot_stay_a_symbol_is_classified_where_the_exception_is() -> None:
    """The worker reads JAX's shape-polymorphism error into ``ErrorInfo.symbolic``, so the client
    goes by that field (capture/annotated.py, learnedretry.py), never by the message's text."""

    def constant(x: jax.Array) -> jax.Array:
        return jnp.zeros(int(x.shape[0]))

    def compare(x: jax.Array) -> jax.Array:
        return x * 2 if x.shape[0] > 3 else x

    assert symbolic_failure(_error(constant, "n")) == {"dimensions": ["n"]}
    assert symbolic_failure(_error(compare, "n")) == {"dimensions": ["n"]}
    assert symbolic_failure(_error(lambda x: x.reshape(-1, 4), "n")) is None  # wrong for some sizes: the user's
    assert symbolic_failure(_error(lambda x: x + jnp.ones(5), "n")) is None
    assert symbolic_failure(ValueError("'n' is not '_DimExpr'")) is None  # not JAX's, whatever it says
