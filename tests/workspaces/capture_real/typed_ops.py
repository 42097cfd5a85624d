"""A typed module as tinygp's solvers/quasisep/ops.py is written: postponed annotations name a
TypeVar whose assignment calls code (load = "definitions" skips it)."""

from __future__ import annotations

from typing import TypeVar

import jax.numpy as jnp

F = TypeVar("F", int, float)


def add_two(a: F | None, b: F | None) -> F | None:
    return a if b is None else b


def shift(x):
    return jnp.concatenate((jnp.zeros_like(x[:1]), x[:-1]), axis=0)
