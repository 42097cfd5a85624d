"""Annotated code proposed with its jaxtyping dimension names symbolic (recipes/symbolic.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlsp.discovery.entrypoints import Entrypoint
from jaxlsp.recipes import NeedsInput, Resolved, propose
from jaxlsp.recipes.symbolic import annotation_shape, fallback, forced, propose_symbolic
from tests.discovery.helpers import discover

SOURCE = """\
import jax
import jax.numpy as jnp
import equinox as eqx
import flax.linen as nn
from jaxtyping import Array, Bool, Float, Int


@jax.jit
def pairwise_sq_dists(x: Float[Array, "n d"], y: Float[Array, "m d"]) -> Float[Array, "n m"]:
    return jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, -1)


def points(p: Float[Array, "n 3"], ids: Int[Array, "*batch n"], keep: Bool[Array, "... n"]):
    return jnp.take(p, ids, axis=0) * keep[..., None]


def bare(x: jax.Array, y: Float[Array, "n d"]):
    return jnp.add(x, y)


def unannotated(x, y: Float[Array, "n"]):
    return jnp.add(x, y)


def expression(x: Float[Array, "n+1"]):
    return jnp.sin(x)


def fixed(x: Float[Array, "4 3"]):
    return jnp.sin(x)


class Scale(eqx.Module):
    factor: float = 2.0

    def __call__(self, x: Float[Array, "batch d"]) -> Float[Array, "batch d"]:
        return x * self.factor


class Dense(nn.Module):
    features: int

    def __call__(self, x: Float[Array, "b 4"]):
        return nn.Dense(self.features)(x)
"""


@pytest.fixture
def found(tmp_path: Path) -> dict[str, Entrypoint]:
    discovery = discover(tmp_path, {"main.py": SOURCE})
    return {e.name: e for e in discovery.entrypoints}


def needs(entry: Entrypoint) -> NeedsInput:
    result = propose(entry)
    assert isinstance(result, NeedsInput)  # what the definition alone says today
    return result


def test_named_dimensions_become_symbolic(found: dict[str, Entrypoint]) -> None:
    proposal = needs(found["pairwise_sq_dists"])
    assert [m["path"] for m in proposal.missing] == [
        "profiles.pairwise_sq_dists.dims.n",
        "profiles.pairwise_sq_dists.dims.d",
        "profiles.pairwise_sq_dists.dims.m",
    ]
    made = propose_symbolic(found["pairwise_sq_dists"], proposal)
    assert isinstance(made, Resolved)
    assert made.profile["symbolic"] == ["n", "d", "m"]
    assert [a["shape"] for a in made.profile["inputs"]["args"]] == [["n", "d"], ["m", "d"]]
    assert made.table["symbolic"] == ["n", "d", "m"]  # saved as it traced
    assert made.fallback is proposal


def test_fixed_sizes_stay_and_variadics_are_one_symbol_each(found: dict[str, Entrypoint]) -> None:
    made = propose_symbolic(found["points"], needs(found["points"]))
    assert isinstance(made, Resolved)
    p, ids, keep = made.profile["inputs"]["args"]
    assert (p["shape"], p["dtype"]) == (["n", 3], "float32")
    assert (ids["shape"], ids["dtype"]) == (["batch", "n"], "int32")
    assert (keep["shape"], keep["dtype"]) == (["keep_0", "n"], "bool")
    assert sorted(made.profile["symbolic"]) == ["batch", "keep_0", "n"]


def test_anything_not_named_by_an_annotation_keeps_the_question(found: dict[str, Entrypoint]) -> None:
    for name in ("bare", "unannotated", "expression"):
        assert propose_symbolic(found[name], needs(found[name])) is None, name
    assert isinstance(propose(found["fixed"]), Resolved)  # nothing to ask: traced as it is today


def test_a_module_call_is_read_from_its_definition(found: dict[str, Entrypoint]) -> None:
    made = propose_symbolic(found["Scale"], needs(found["Scale"]))
    assert isinstance(made, Resolved)
    assert made.profile["inputs"]["args"][0]["shape"] == ["batch", "d"]
    assert made.profile["symbolic"] == ["batch", "d"]
    # a field with no default is a value to ask for, never a symbol
    assert propose_symbolic(found["Dense"], needs(found["Dense"])) is None


def test_annotation_shape() -> None:
    assert annotation_shape("x", 'Float[Array, "n 3"]') == ["n", 3]
    assert annotation_shape("x", "Float32[Array, '*batch _ #c']") == ["batch", "x_1", "c"]
    assert annotation_shape("x", 'Float[Array, "n+1"]') is None
    assert annotation_shape("x", "jax.Array") is None


def test_a_dimension_that_cannot_stay_a_symbol_asks_as_before(found: dict[str, Entrypoint]) -> None:
    proposal = needs(found["pairwise_sq_dists"])
    made = propose_symbolic(found["pairwise_sq_dists"], proposal)
    assert isinstance(made, Resolved)
    # JAX 0.10.2's words for ``int(x.shape[1])`` and ``if x.shape[0] > 3``
    constant = "InconclusiveDimensionOperation: Symbolic dimension 'd' used in a context that requires a constant"
    said = f"tracing pairwise_sq_dists failed: {constant} This error arises for comparison"
    back = fallback(made, said, ["d"], "main.py:9")  # the worker's ErrorInfo.symbolic: JAX quoted 'd'
    assert isinstance(back, NeedsInput)
    assert back.missing[0]["path"] == "profiles.pairwise_sq_dists.dims.d"
    assert back.missing[0]["message"].endswith(f"; d cannot be traced for any size (main.py:9: {constant})")
    assert {m["path"] for m in back.missing} == {m["path"] for m in proposal.missing}
    assert forced(["n", "3"], ["n"]) == ["n"] and forced([], ["n"]) == []
    # any other failure (a shape error for some sizes is the user's) has no symbolic field: no fallback
    divide = "InconclusiveDimensionOperation: Cannot divide evenly the sizes of shapes (n,) and (-1, 4)."
    assert forced(None, ["n"]) is None and fallback(made, divide, None) is None
