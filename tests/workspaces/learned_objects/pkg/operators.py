"""Operators dispatched on their type, lineax's way: each registration is a top-level ``def _``,
so the module's name ``_`` ends bound to the last one."""

import functools

import equinox as eqx
import jax.numpy as jnp
from jax import Array


class Diagonal(eqx.Module):
    diag: Array


class Sum(eqx.Module):
    first: eqx.Module
    second: eqx.Module


@functools.singledispatch
def materialise(operator: object) -> Array:
    raise NotImplementedError(type(operator))


@materialise.register(Diagonal)
def _(operator: Diagonal) -> Array:
    return jnp.diag(operator.diag)


@materialise.register(Sum)
def _(operator: Sum) -> Array:
    return materialise(operator.first) + materialise(operator.second)
