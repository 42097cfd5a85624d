"""JAX's own trace caches, filled in the warm spare before it forks the next capture (issue 29).

A capture forked from the spare starts with JAX's per-process caches empty: every `jax.numpy`
function the model calls (they are `jit`-wrapped: `add`, `where`, `mean`...) is traced for the
first time, and linearized for the first time under `jax.grad`. That is most of a small
gradient's re-trace (0.05 of 0.12 s at 1,000 equations): the same trace in a process that has
made it once takes 0.07 s. The spare may not run the user's code to fill those caches, but the
calls that missed are calls of JAX's own functions on abstract values:

- :class:`Recorder`, in the forked capture, notes each call of a jitted function defined in JAX
  whose trace (``pjit._trace_for_jit``) or linearization (``ad.linearize_jaxpr``) missed the
  cache, spelled as data (:func:`spell`): the function by module and name, each traced argument
  by its abstract value, every other argument by value (numbers, text, dtypes, tuples, lists and
  dicts of them). A call that does not spell, or whose spelling does not give the same call back
  (checked there, in the capture, by rebuilding it), is not noted.
- The result carries them (``primes``); the server sends the new ones to the spare
  (capture/launch/spare.py), which makes the same calls with :func:`prime` (``jit(...).trace`` on
  abstract values, then ``ad.linearize_jaxpr`` where the capture linearized), so the next fork
  finds JAX's caches as a process that traced the model once has them.

Only JAX's code runs in the spare, on shapes: no user code, no array, no device. What a primed
cache returns is what JAX itself computes for the same key (JAX keys its caches on the function,
the arguments' abstract values, the static arguments and its configuration), so the program is
the one a cold trace makes; ``tests/worker/reuse/test_priming.py`` compares whole graphs.
Imports only the stdlib at module level, and JAX's internals through :mod:`jaxcompat`-style
guarded lookups (a JAX without them primes nothing).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, cast

from jaxlsp.worker.tracing.jaxcompat import caches

if TYPE_CHECKING:
    import numpy as np
    from jax.core import ShapedArray
    from jax.extend.core import ClosedJaxpr
    from jax.stages import Wrapped

    #: A call the recorder noted: the jitted function's Python function, its arguments, and the
    #: linearization that missed (``[nonzeros, instantiate, allow_fwds, is_vjp]``; None: its trace)
    Missed = tuple[Callable[..., object], tuple[object, ...], dict[str, object], list[object] | None]

#: calls one capture may report, and the spare keeps priming at most (capture/launch/spare.py caps the sum)
MAX_PRIMES = 1024
#: calls the recorder holds on to (each pjit call's arguments, for a linearization that misses later)
MAX_HELD = 200_000
_MAX_DEPTH = 6  # nesting of tuples / lists / dicts in one argument


class Unspellable(Exception):
    """A value with no spelling another process rebuilds as the same value."""


# --- spelling --------------------------------------------------------------------------------------
def spell(x: object, depth: int = 0) -> list[object]:
    """``x`` as JSON data :func:`rebuild` turns back into an equal value (a tracer into its abstract
    value); Unspellable for anything else."""
    if depth > _MAX_DEPTH:
        raise Unspellable("nested too deeply")
    if caches.is_tracer(x):
        aval = caches.abstract_value(x)
        if not caches.is_plain_array(aval) or not all(type(d) is int for d in aval.shape):
            raise Unspellable(f"abstract value {aval}")
        return ["a", list(aval.shape), aval.dtype.name, bool(aval.weak_type)]
    if x is None or type(x) in (bool, int, str):
        return ["v", x]
    if type(x) is float:
        return ["v", x] if math.isfinite(x) else ["f", repr(x)]  # inf, -inf, nan: no JSON numbers
    if type(x) in (tuple, list):
        return ["t" if type(x) is tuple else "l", [spell(item, depth + 1) for item in cast("Sequence[object]", x)]]
    if type(x) is dict:
        if not all(type(k) is str for k in x):
            raise Unspellable("a dict with other keys than text")
        return ["d", [[k, spell(v, depth + 1)] for k, v in x.items()]]
    return _spell_dtype(x)


def _spell_dtype(x: object) -> list[object]:
    import numpy as np

    if isinstance(x, np.generic) and x.dtype.kind in "biuf" and x.shape == ():
        value = x.item()  # a numpy scalar (``jnp.finfo(dtype).min``): its dtype and its exact value
        if type(value) is float and not math.isfinite(value):
            return ["ns", x.dtype.name, repr(value)]
        return ["ns", x.dtype.name, value]
    if type(x) is np.dtype or isinstance(x, np.dtype):
        if _dtype(x.name) != x or type(_dtype(x.name)) is not type(x):
            raise Unspellable(f"dtype {x}")
        return ["dt", x.name]
    if isinstance(x, type):
        import jax.numpy as jnp

        name = getattr(x, "__name__", "")
        if getattr(jnp, name, None) is x:
            return ["jt", name]
        if issubclass(x, np.generic) and getattr(np, name, None) is x:
            return ["nt", name]
    raise Unspellable(f"no spelling for {type(x).__name__}")


def _dtype(name: str) -> np.dtype[np.generic]:
    import jax.numpy as jnp

    return jnp.dtype(name)


def rebuild(spelled: object, avals: list[ShapedArray]) -> object:
    """The value :func:`spell` spelled; each abstract value becomes a placeholder ``_Slot`` whose
    number indexes ``avals`` (the caller puts a traced value there). What is no spelling raises
    (an IndexError, a TypeError, Unspellable): the callers skip it."""
    spelling = cast("list[object]", spelled)  # JSON: spell's lists, as the request carried them
    kind, body = spelling[0], spelling[1:]
    if kind == "a":
        shape, dtype, weak = body
        dims = tuple(int(d) for d in cast("list[int]", shape))
        avals.append(caches.shaped_array(dims, _dtype(str(dtype)), bool(weak)))
        return _Slot(len(avals) - 1)
    if kind == "v":
        value = body[0]
        if value is not None and type(value) not in (bool, int, float, str):
            raise Unspellable("a value of another kind")
        return value
    if kind in ("t", "l"):
        items = [rebuild(item, avals) for item in cast("list[object]", body[0])]
        return tuple(items) if kind == "t" else items
    if kind == "d":
        return {str(k): rebuild(v, avals) for k, v in cast("list[list[object]]", body[0])}
    if kind == "f":
        if body[0] not in ("inf", "-inf", "nan"):
            raise Unspellable("a float of another kind")
        return float(body[0])
    if kind == "ns":
        name, value = str(body[0]), body[1]
        if type(value) not in (bool, int, float, str):
            raise Unspellable("a numpy scalar of another kind")
        return _dtype(name).type(float(value) if type(value) is str else cast("bool | int | float", value))
    if kind == "dt":
        return _dtype(str(body[0]))
    if kind == "jt":
        import jax.numpy as jnp

        return _named(jnp, str(body[0]))
    if kind == "nt":
        import numpy as np

        return _named(np, str(body[0]))
    raise Unspellable(f"unknown spelling {kind!r}")


def _named(module: ModuleType, name: str) -> type:
    value = getattr(module, name, None)
    if not isinstance(value, type):
        raise Unspellable(f"{module.__name__}.{name} is no type")
    return value


class _Slot:
    """Where a traced value goes in a rebuilt call."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _filled(x: object, values: Sequence[object]) -> object:
    if type(x) is _Slot:
        return values[x.index]
    if type(x) in (tuple, list):
        items = [_filled(item, values) for item in cast("Sequence[object]", x)]
        return tuple(items) if type(x) is tuple else items
    if type(x) is dict:
        return {k: _filled(v, values) for k, v in x.items()}
    return x


def _same(rebuilt: object, original: object) -> bool:
    """A rebuilt value equals the original (a slot stands for any traced value: its abstract value
    is checked apart)."""
    if type(rebuilt) is _Slot:
        return caches.is_tracer(original)
    if type(rebuilt) is not type(original):
        return False
    if type(rebuilt) in (tuple, list):  # and so is the original (the same type)
        ours, theirs = cast("Sequence[object]", rebuilt), cast("Sequence[object]", original)
        return len(ours) == len(theirs) and all(_same(a, b) for a, b in zip(ours, theirs, strict=True))
    if type(rebuilt) is dict:
        other = cast("dict[object, object]", original)
        return list(rebuilt) == list(other) and all(_same(rebuilt[k], other[k]) for k in rebuilt)
    if type(rebuilt) is float and math.isnan(rebuilt):
        return math.isnan(cast(float, original))
    return bool(rebuilt is original or rebuilt == original)


# --- which functions -------------------------------------------------------------------------------
def _jax_dirs() -> tuple[str, ...]:
    import jax

    place = os.path.dirname(jax.__file__)
    return tuple({os.path.join(place, ""), os.path.join(os.path.realpath(place), "")})


def resolve(name: str) -> Wrapped:
    """The jitted function ``module:qualname`` names, defined in JAX; Unspellable otherwise."""
    module_name, _, qualname = name.partition(":")
    if not module_name.startswith("jax.") or not qualname or "<" in qualname:
        raise Unspellable(f"{name} is not a function of JAX's modules")
    obj: object = sys.modules.get(module_name)  # never an import: priming runs only what is loaded
    if obj is None:
        raise Unspellable(f"{module_name} is not imported")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(getattr(obj, "trace", None)):  # a ``jnp.ufunc``: its call is the jitted function
        obj = getattr(obj, "_func", None)
    wrapped = getattr(obj, "__wrapped__", None)
    code = getattr(wrapped, "__code__", None)
    if code is None or not callable(getattr(obj, "trace", None)):
        raise Unspellable(f"{name} is no jitted function")
    if not code.co_filename.startswith(_jax_dirs()):
        raise Unspellable(f"{name} is not defined in JAX")
    return cast("Wrapped", obj)  # a jitted function of JAX's (its ``trace`` is callable)


def _name_of(fun: object) -> str:
    """``module:qualname`` of a jitted function's Python function, when that name finds its jit
    wrapper again (module-level ``@jit`` functions: ``jax.numpy``'s ``add``, ``where``, ...)."""
    name = f"{getattr(fun, '__module__', '')}:{getattr(fun, '__qualname__', '')}"
    if getattr(resolve(name), "__wrapped__", None) is not fun:
        raise Unspellable(f"{name} finds another function")
    return name


# --- recording (in the forked capture) --------------------------------------------------------------
class _Inferred(Protocol):
    params: dict[str, object]  # a pjit equation's: ``jaxpr`` among them


class _Pjit(Protocol):
    """What the recorder wraps of jax's ``pjit`` module (caches.jit_internals)."""

    _infer_params: Callable[..., tuple[_Inferred, object]]
    _trace_for_jit: Callable[..., object]


class _Ad(Protocol):
    """What the recorder wraps and reads of jax's ``ad`` module (caches.jit_internals)."""

    linearize_jaxpr: Callable[..., object]
    _linearize_jaxpr: functools._lru_cache_wrapper[object]


class Recorder:
    """Notes the calls of JAX's jitted functions whose trace or linearization missed JAX's caches
    while it is installed; :meth:`entries` spells them."""

    def __init__(self) -> None:
        # id(jaxpr) -> (the jitted function's Python function, its jaxpr, args, kwargs)
        self._calls: dict[int, tuple[Callable[..., object], ClosedJaxpr, tuple[object, ...], dict[str, object]]] = {}
        self._missed: list[Missed] = []
        self._open: list[list[bool]] = []  # one flag per _infer_params call in progress: did it trace

    @contextlib.contextmanager
    def installed(self) -> Iterator[Recorder]:
        try:
            pjit, ad = cast("tuple[_Pjit, _Ad]", caches.jit_internals())
            infer, trace_for_jit, linearize = pjit._infer_params, pjit._trace_for_jit, ad.linearize_jaxpr
            cache = ad._linearize_jaxpr
        except (ImportError, AttributeError):
            yield self  # another JAX: nothing noted
            return

        def infer_params(
            fun: Callable[..., object], ji: object, args: tuple[object, ...], kwargs: dict[str, object]
        ) -> tuple[_Inferred, object]:
            flag = [False]
            self._open.append(flag)
            try:
                out = infer(fun, ji, args, kwargs)
            finally:
                self._open.pop()
            jaxpr = cast("ClosedJaxpr | None", out[0].params.get("jaxpr"))  # a pjit's params
            if flag[0]:
                self._missed.append((fun, args, kwargs, None))
            if jaxpr is not None and len(self._calls) < MAX_HELD:
                self._calls.setdefault(id(jaxpr), (fun, jaxpr, args, kwargs))
            return out

        def traced_for_jit(*args: object, **kwargs: object) -> object:
            if self._open:
                self._open[-1][0] = True
            return trace_for_jit(*args, **kwargs)

        def linearize_jaxpr(
            jaxpr: ClosedJaxpr,
            nonzeros: Sequence[object],
            instantiate: bool | Sequence[object] = False,
            allow_fwds: bool | Sequence[object] = True,
            **kw: object,
        ) -> object:
            before = cache.cache_info().misses
            out = linearize(jaxpr, nonzeros, instantiate, allow_fwds, **kw)
            call = self._calls.get(id(jaxpr))
            if call is not None and call[1] is jaxpr and cache.cache_info().misses > before:
                lin: list[object] = [
                    [bool(v) for v in nonzeros],
                    _flags(instantiate, len(jaxpr.jaxpr.outvars)),
                    _flags(allow_fwds, len(jaxpr.consts) + len(jaxpr.jaxpr.invars)),
                    bool(kw.get("is_vjp")),
                ]
                self._missed.append((call[0], call[2], call[3], lin))
            return out

        pjit._infer_params, pjit._trace_for_jit, ad.linearize_jaxpr = infer_params, traced_for_jit, linearize_jaxpr
        try:
            yield self
        finally:
            pjit._infer_params, pjit._trace_for_jit, ad.linearize_jaxpr = infer, trace_for_jit, linearize

    def entries(self) -> list[list[object]]:
        """The missed calls that spell and rebuild as the same call, each once, in the order they
        were made: ``[function, args, kwargs, linearization or None]``."""
        out: list[list[object]] = []
        seen: set[str] = set()
        for fun, args, kwargs, lin in self._missed:
            if len(out) >= MAX_PRIMES:
                break
            try:
                name = _name_of(fun)
                entry: list[object] = [name, spell(tuple(args)), spell(dict(kwargs)), lin]
                key = json.dumps(entry, separators=(",", ":"))
                if key in seen:
                    continue
                avals: list[ShapedArray] = []
                back_args, back_kwargs = rebuild(entry[1], avals), rebuild(entry[2], avals)
                if not (_same(back_args, tuple(args)) and _same(back_kwargs, dict(kwargs))):
                    continue
                traced = [x for x in _leaves((args, kwargs)) if caches.is_tracer(x)]
                if [caches.abstract_value(x) for x in traced] != avals:
                    continue  # a sharding, a varying axis: what the spare's placeholders would not have
            except Exception:  # whatever does not spell is simply not primed
                continue
            seen.add(key)
            out.append(entry)
        return out


def _flags(value: bool | Sequence[object], n: int) -> list[bool]:
    return [bool(value)] * n if type(value) is bool else [bool(v) for v in value]


def _leaves(x: object) -> Iterator[object]:
    if type(x) in (tuple, list):
        for item in cast("Sequence[object]", x):
            yield from _leaves(item)
    elif type(x) is dict:
        for item in x.values():
            yield from _leaves(item)
    else:
        yield x


# --- priming (in the spare) ----------------------------------------------------------------------
def prime(entries: object, stop: Callable[[], bool] | None = None) -> int:
    """Make each entry's call in this process (abstract values only), so JAX's caches hold what
    the next forked capture would otherwise trace; the number of calls made. An entry that fails
    is skipped: priming only ever saves time. ``stop()`` true ends it (the spare's time limit)."""
    import jax

    done = 0
    for entry in entries if isinstance(entries, list) else []:
        if stop is not None and stop():
            break
        try:
            name, args, kwargs, lin = entry
            fn = resolve(str(name))
            avals: list[ShapedArray] = []
            call_args, call_kwargs = rebuild(args, avals), rebuild(kwargs, avals)
            if type(call_args) is not tuple or type(call_kwargs) is not dict:
                continue
            structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals]  # type: ignore[no-untyped-call]
            filled_args = cast("tuple[object, ...]", _filled(call_args, structs))  # a tuple and a dict as rebuilt
            traced = fn.trace(*filled_args, **cast("dict[str, object]", _filled(call_kwargs, structs)))
            if lin is not None:
                nonzeros, instantiate, allow_fwds, is_vjp = lin
                caches.linearize_jaxpr(
                    traced.jaxpr,
                    [bool(v) for v in nonzeros],
                    tuple(bool(v) for v in instantiate),
                    tuple(bool(v) for v in allow_fwds),
                    is_vjp=bool(is_vjp),
                )
            done += 1
        except Exception:
            continue
    return done
