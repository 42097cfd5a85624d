"""The graph-size limits (jaxlsp/worker/tracing/limits.py) on real jaxprs: the defaults take a
program past the 200,000 equations they allowed before the compact file, and a program past a
limit is refused with its figure and the limit, never cut."""

from __future__ import annotations

from typing import Any

import pytest

from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.tracing import limits

jax = pytest.importorskip("jax")

CALLS, BODY = 250, 1_000  # a jitted body of 1,000 equations called 250 times: 250,250 equations
EQUATIONS = CALLS * (1 + BODY)  # past the old default (200,000), well under the new one
VALUES = 1 + CALLS * (1 + 1 + BODY)  # the input; per call its result, the body's input and results


def repeated_body() -> Any:
    """The jaxpr of ``CALLS`` calls of one jitted chain of ``BODY`` ``lax.sin``: every call's
    equation holds the same body, counted (and made into nodes) once per call, as a graph has a
    node per equation of every nested jaxpr. Traced in well under a second."""

    @jax.jit
    def body(x: Any) -> Any:
        for _ in range(BODY):
            x = jax.lax.sin(x)
        return x

    def f(x: Any) -> Any:
        for _ in range(CALLS):
            x = body(x)
        return x

    return jax.make_jaxpr(f)(jax.numpy.zeros(3))


def test_the_defaults_take_a_program_past_the_old_limit_and_a_lower_one_refuses_it() -> None:
    closed = repeated_body()
    assert limits.count(closed) == (EQUATIONS, VALUES)
    limits.check_jaxpr(closed, {})  # the defaults: traced
    with pytest.raises(CaptureError) as refused:
        limits.check_jaxpr(closed, {"equations": EQUATIONS - 1})
    assert refused.value.kind == "refused"
    assert str(refused.value).startswith(
        f"the traced program has {EQUATIONS:,} equations, over the limit of {EQUATIONS - 1:,} per graph; "
        "nothing was cut (a graph is never truncated). Raise the limit with the setting jaxlsp.limits.equations"
    )
    with pytest.raises(CaptureError, match=f"defines {VALUES:,} values, over the limit of {VALUES - 1:,} per"):
        limits.check_jaxpr(closed, {"values": VALUES - 1})
