"""Shape contracts in the worker (jaxlsp/capture/worker/contracts.py), in process: jaxtyping's own
checker on Equinox and Linen methods and plain functions during make_jaxpr, the trace going on,
the original code back afterwards."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jaxtyping")
pytest.importorskip("beartype")
pytest.importorskip("equinox")

import jax
import jax.numpy as jnp

from jaxlsp.capture.worker.contracts import Contracts
from jaxlsp.capture.worker.failures import Workspace

SOURCE = """
import equinox as eqx
import flax.linen as nn
import jax
from jaxtyping import Array, Float


class Lin(eqx.Module):
    w: Array

    def __init__(self, key):
        self.w = jax.random.normal(key, (4, 2))

    def __call__(self, x: Float[Array, "b 5"]) -> Float[Array, "b 2"]:
        return x @ self.w


class Dense(nn.Module):
    @nn.compact
    def __call__(self, x: Float[Array, "b 3"]) -> Float[Array, "b 8"]:
        return nn.Dense(8)(x)


@jax.jit
def same(a: Float[Array, "n"], b: Float[Array, "n"]) -> Float[Array, "n"]:
    return a + b[: a.shape[0]]
"""


def test_methods_and_jitted_functions_are_checked_and_the_trace_goes_on(tmp_path: Path) -> None:
    (tmp_path / "contracted.py").write_text(textwrap.dedent(SOURCE))
    sys.path.insert(0, str(tmp_path))
    try:
        import contracted
    finally:
        sys.path.remove(str(tmp_path))
    original = contracted.Lin.__call__.__code__ if hasattr(contracted.Lin.__call__, "__code__") else None
    with Contracts(Workspace(str(tmp_path))) as check:
        lin = contracted.Lin(jax.random.key(0))
        assert jax.make_jaxpr(lin)(jnp.ones((3, 4))).out_avals[0].shape == (3, 2)
        dense = contracted.Dense()
        variables = jax.eval_shape(dense.init, jax.random.key(0), jnp.ones((2, 4)))
        jax.make_jaxpr(lambda v, x: dense.apply(v, x))(variables, jnp.ones((2, 4)))
        jax.make_jaxpr(contracted.same)(jnp.ones(3), jnp.ones(5))
    assert sorted(check.checked) == ["contracted.Dense.__call__", "contracted.Lin.__call__", "contracted.same"]
    messages = sorted(v["message"] for v in check.violations)
    assert messages == [
        'b: expected Float[Array, "n"], got f32[5] (n=3 from a)',
        'x: expected Float[Array, "b 3"], got f32[2,4] (b=2 from x)',
        'x: expected Float[Array, "b 5"], got f32[3,4] (b=3 from x)',
    ]
    if original is not None:
        assert contracted.Lin.__call__.__code__ is original  # the user's code is back
