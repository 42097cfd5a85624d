"""Shape contracts in the worker (jaxlsp/worker/tracing/contracts.py), in process: jaxtyping's own
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

from jaxlsp.worker.core.failures import Workspace
from jaxlsp.worker.tracing.contracts import Contracts

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


UNCALLED = """
from jaxtyping import Array, Float


def used(x: Float[Array, "b 4"]) -> Float[Array, "b 4"]:
    return x * 2


def unused(x: Float[Array, "b 4"], y: Float[Array, "b"]) -> Float[Array, "b 4"]:
    return x + y[:, None]
"""


def test_a_checker_is_made_only_for_the_functions_a_trace_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Making a checker is jaxtyping's and beartype's code generation (2-4 ms each in a forked
    # capture): a workspace's annotated functions that the trace never calls must not pay it.
    from beartype import beartype

    from jaxlsp.worker.tracing import contracts

    made: list[str] = []

    def counting(fn: object) -> object:
        made.append(getattr(fn, "__qualname__", "?"))
        return beartype(fn)  # type: ignore[call-overload]

    monkeypatch.setattr(contracts, "checker", lambda: (counting, "beartype"))
    (tmp_path / "uncalled.py").write_text(UNCALLED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import uncalled

    with Contracts(Workspace(str(tmp_path))) as check:
        assert jax.make_jaxpr(uncalled.used)(jnp.ones((3, 4))).out_avals[0].shape == (3, 4)
        made_by_the_trace = sorted(set(made))
    assert sorted(check.checked) == ["uncalled.unused", "uncalled.used"]
    assert check.violations == []
    assert made_by_the_trace == ["used"]


def test_the_check_looks_only_at_the_modules_imported_after_the_spare_warmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A forked capture's own imports are the workspace's candidates: the warm spare's 1,500
    # library modules (never a workspace file) were 20-40 ms of every capture to look through.
    from jaxlsp.worker.core import failures

    monkeypatch.setattr(failures, "_WARM", {})
    source = 'from jaxtyping import Array, Float\n\n\ndef f(x: Float[Array, "n"]) -> Float[Array, "n"]:\n    return x\n'
    (tmp_path / "held_by_spare.py").write_text(source)
    (tmp_path / "imported_by_capture.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    import held_by_spare

    failures.remember_loaded()
    assert held_by_spare not in failures.imported_since()
    import imported_by_capture

    assert imported_by_capture in failures.imported_since()
    with Contracts(Workspace(str(tmp_path))) as check:
        pass
    assert sorted(check.checked) == ["imported_by_capture.f"]
