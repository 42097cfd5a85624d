"""The adapter over private JAX modules still finds frames, name stacks and the backend flag."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")


def test_user_frames_and_name_stack() -> None:
    import jax
    import jax.numpy as jnp

    from jaxlsp.capture.worker import jaxcompat

    def f(x):
        with jax.named_scope("outer"):
            return jnp.sin(x)

    closed = jax.make_jaxpr(jax.grad(f))(1.0)
    eqn = closed.jaxpr.eqns[0]
    frames = jaxcompat.user_frames(eqn.source_info)
    assert frames and frames[0].file == __file__
    assert frames[0].function.endswith("f")
    assert frames[0].line > 0 and frames[0].end_column > frames[0].column
    items = jaxcompat.name_stack_items(eqn.source_info)
    assert ("scope", "outer") in items
    assert ("transform", "jvp") in items
    assert jaxcompat.user_frames(None) == []
    assert jaxcompat.name_stack_items(None) == []
    assert isinstance(jaxcompat.backends_initialized(), bool)
