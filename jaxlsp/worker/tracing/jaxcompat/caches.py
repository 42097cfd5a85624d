"""JAX's jit entry points and abstract values as priming (``worker/reuse/priming.py``) needs them:
tracers and their abstract values, the ``jit`` trace and linearization functions it wraps to
note cache misses, and the linearization it repeats in the warm spare."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, TypeGuard, cast

if TYPE_CHECKING:
    from jax._src import core
    from jax.extend.core import ClosedJaxpr
    from numpy.typing import DTypeLike


def is_tracer(x: object) -> bool:
    from jax._src import core

    return isinstance(x, core.Tracer)


def abstract_value(x: object) -> core.AbstractValue:
    """A tracer's abstract value (``core.typeof``)."""
    from jax._src import core

    return cast("core.AbstractValue", core.typeof(x))


def is_plain_array(aval: object) -> TypeGuard[core.ShapedArray]:
    """An abstract value that is exactly a ``ShapedArray`` (no subclass: no sharding or varying axes
    a placeholder would lose)."""
    from jax._src import core

    return type(aval) is core.ShapedArray


def shaped_array(shape: tuple[int, ...], dtype: DTypeLike, weak_type: bool) -> core.ShapedArray:
    from jax._src import core

    return core.ShapedArray(shape, dtype, weak_type=weak_type)


def jit_internals() -> tuple[ModuleType, ModuleType]:
    """The modules whose functions priming wraps while a capture runs: ``pjit`` (``_infer_params``,
    ``_trace_for_jit``) and ``ad`` (``linearize_jaxpr`` and its cache ``_linearize_jaxpr``).
    ImportError or AttributeError in another JAX, where nothing is noted."""
    from jax._src import pjit
    from jax._src.interpreters import ad

    for module, name in ((pjit, "_infer_params"), (pjit, "_trace_for_jit"), (ad, "linearize_jaxpr")):
        getattr(module, name)
    ad._linearize_jaxpr.cache_info  # noqa: B018  # the miss count priming reads
    return pjit, ad


def linearize_jaxpr(
    jaxpr: ClosedJaxpr, nonzeros: list[bool], instantiate: tuple[bool, ...], allow_fwds: tuple[bool, ...], is_vjp: bool
) -> object:
    from jax._src.interpreters import ad

    return ad.linearize_jaxpr(jaxpr, nonzeros, instantiate, allow_fwds, is_vjp=is_vjp)
