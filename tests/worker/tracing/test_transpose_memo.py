"""jax's transposition rules memoised (jaxcompat.TransposeMemo): a gradient's backward pass over
repeated layers stages, equation by equation, the program the rules give, source info included.

Each program is traced with repeated Linen layers replayed (worker/reuse/replay.py: their tangent
equations share params), once with the memo and once without, and the jaxprs compared as text
with every equation's name stack and source line.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

pytest.importorskip("flax")

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlsp.worker.reuse import replay
from jaxlsp.worker.tracing import jaxcompat


class Block(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(self.width, name="up")(nn.LayerNorm()(x))
        h = jax.nn.gelu(h) * jnp.tanh(h) + jnp.sin(h)
        h = nn.Dense(x.shape[-1], name="down")(h) / jnp.sqrt(jnp.float32(self.width))
        return x + jnp.cumsum(h, axis=-1)[..., ::-1] - jnp.mean(h, axis=-1, keepdims=True)


class Stack(nn.Module):
    depth: int = 6

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for _ in range(self.depth):
            x = Block(16)(x)
        return nn.Dense(3)(x[:, 1:])


def _program(memo: jaxcompat.TransposeMemo | None) -> str:
    model = Stack()
    x = jax.ShapeDtypeStruct((2, 8), jnp.float32)
    variables = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), x)

    def loss(v: Any, x: jax.Array) -> jax.Array:
        return jnp.sum(model.apply(v, x) ** 2)

    with replay.replaying() as replayer, memo.installed() if memo is not None else contextlib.nullcontext():
        closed = jax.make_jaxpr(jax.grad(loss))(variables, x)
    assert replayer is not None and replayer.replayed >= 3
    return str(closed.jaxpr.pretty_print(source_info=True, name_stack=True))


def test_repeated_layers_transpose_to_the_same_program() -> None:
    memo = jaxcompat.TransposeMemo()
    with_memo = _program(memo)
    without = _program(None)
    assert memo.replayed > 100  # a layer's rules recorded from the second layer, replayed after
    assert with_memo == without


def test_the_rule_tables_are_jaxs_own_again_after_the_block() -> None:
    from jax._src.interpreters import ad

    before = (dict(ad.fancy_transposes), dict(ad.primitive_transposes))
    with jaxcompat.TransposeMemo().installed():
        assert ad.fancy_transposes != before[0]
    assert (dict(ad.fancy_transposes), dict(ad.primitive_transposes)) == before
