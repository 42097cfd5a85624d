"""A call seen in an example run, written back as a recipe profile when it can be.

:func:`profile_table` turns the target's constructor arguments (a Linen module's fields, the
arguments an NNX or Equinox ``__init__`` was called with) and the call's abstract arguments into
the TOML form of a ``[profiles.NAME]`` table: arrays as shapes and dtypes, keys, Python values,
pytrees of them, and references to importable classes and functions. When one value cannot be
written that way (a model passed as an argument, a class defined in a function, a dtype recipes
do not know) it returns None, and the profile records the example itself instead.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import math
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeGuard, cast

if TYPE_CHECKING:
    import jax
    import numpy as np
    from _typeshed import DataclassInstance

# recipes/schema.py's DTYPES, which the worker's input builder makes
_RECIPE_DTYPES = frozenset({
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "bool", "complex64", "complex128",
})  # fmt: skip
_WIDE = frozenset({"float64", "int64", "uint64", "complex128"})
_FILLED_BY_WORKER = {"nnx": "rngs", "equinox": "key"}
# Public homes of library objects whose __module__ is private (jax._src..., flax.linen.activation).
_PUBLIC = ("jax.numpy", "jax.nn", "jax.nn.initializers", "jax", "jax.lax", "flax.linen", "flax.nnx", "equinox",
           "equinox.nn", "optax")  # fmt: skip


class NotExpressible(Exception):
    """A value a recipe cannot spell."""


#: a call's positional and keyword arguments
Arguments = tuple[list[object], dict[str, object]]
#: the abstract constructor arguments an example run saw a module made with, or None
Constructed = Callable[[object], "Arguments | None"]


class Converter:
    def __init__(self, target_path: str, target_module: str, constructed: Constructed | None = None) -> None:
        self.target_path = target_path
        self.target_module = target_module
        self.constructed = constructed
        self.wide = False

    def call(self, args: list[object], kwargs: dict[str, object]) -> dict[str, object]:
        out: dict[str, object] = {}
        if args:
            out["args"] = [self.spec(a) for a in args]
        if kwargs:
            out["kwargs"] = {str(k): self.spec(v) for k, v in kwargs.items()}
        return out

    def spec(self, value: object, depth: int = 0) -> object:
        """``value`` as a recipe's input spec (JSON-able), or NotExpressible."""
        if depth > 16:
            raise NotExpressible("nested too deeply")
        if value is None:
            return {"kind": "none"}
        if isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise NotExpressible("a number that is not finite")
            return value
        if _is_array(value):
            return self.array(value)
        if isinstance(value, tuple) and isinstance(getattr(type(value), "_fields", None), tuple):
            # a NamedTuple (recurrentgemma's GriffinConfig, a cache): its class called with its
            # fields, not a list, which has none of its attributes
            names: tuple[str, ...] = getattr(type(value), "_fields")  # noqa: B009  (a NamedTuple's, untyped)
            return self.called(type(value), [], {str(f): getattr(value, f) for f in names}, depth)
        if isinstance(value, list | tuple):
            return [self.spec(v, depth + 1) for v in value]
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value) or "kind" in value or "ref" in value:
                raise NotExpressible("a dict whose keys are not plain names")
            return {k: self.spec(v, depth + 1) for k, v in value.items()}
        if isinstance(value, enum.Enum):
            return {"ref": self.ref(type(value)) + f".{value.name}"}
        if isinstance(value, functools.partial):
            args = [self.spec(value.func, depth + 1)]
            args += [self.spec(a, depth + 1) for a in value.args]
            out: dict[str, object] = {"ref": "functools:partial", "args": args}
            if value.keywords:
                out["kwargs"] = {k: self.spec(v, depth + 1) for k, v in value.keywords.items()}
            return out
        if isinstance(value, type) or inspect.isfunction(value) or inspect.isbuiltin(value) or _is_jax_callable(value):
            return {"ref": self.ref(value)}
        if _is_linen(value):
            return {"ref": self.ref(type(value)), "kwargs": self.linen_fields(value, depth + 1)}
        if _is_equinox(value):
            return self.equinox(value, depth + 1)
        if _is_nnx(value):
            return self.nnx(value, depth + 1)
        if _is_config(value) and not _generated_init(type(value)):
            # an ``__init__`` of its own takes other arguments than the fields (equinox's
            # ``GetKey(seed)`` keeps ``seed``, ``call`` and ``key``): its parameters, as kept
            args, kwargs = _init_from_attributes(value)
            return self.called(type(value), args, kwargs, depth)
        if _is_config(value):
            # A field left at its default is left out, as a Linen field is: the constructor
            # makes it again (a config's initialisers are closures no recipe can name)
            fields = [f for f in dataclasses.fields(value) if f.init and not _at_default(value, f)]
            config = {f.name: self.spec(getattr(value, f.name), depth + 1) for f in fields}
            return {"ref": self.ref(type(value)), "kwargs": config}
        name = getattr(value, "name", None)
        # NumPy 2's dtype objects are of per-type classes (``Float64DType``), no longer named
        # ``dtype``: an array's ``.dtype`` handed on (interpax's ``_cubic2(..., dtype)``) was unspellable
        if _is_numpy_dtype(value) and isinstance(name, str) and name in _RECIPE_DTYPES:
            return {"ref": f"jax.numpy:{name}"}
        raise NotExpressible(f"a {type(value).__module__}.{type(value).__qualname__}")

    def array(self, value: jax.ShapeDtypeStruct | jax.Array | np.ndarray) -> dict[str, object]:
        import jax

        dtype = value.dtype
        try:
            if jax.numpy.issubdtype(dtype, jax.dtypes.prng_key):
                return {"kind": "key"}
        except Exception:
            pass
        # the type JAX computes with, not the one the caller handed it: a NumPy int64 array under
        # JAX's default x64 off is int32 from the first operation on (issue 56.8)
        name = str(jax.dtypes.canonicalize_dtype(dtype))
        if name not in _RECIPE_DTYPES:
            raise NotExpressible(f"dtype {name}")
        shape = [int(d) for d in value.shape] if all(isinstance(d, int) for d in value.shape) else None
        if shape is None or any(d <= 0 for d in shape):
            raise NotExpressible("a shape that is not positive integers")
        self.wide = self.wide or name in _WIDE
        out: dict[str, object] = {"kind": "array", "shape": shape}
        if name != "float32":
            out["dtype"] = name
        split = _sharding_entries(value)
        if split:
            out["sharding"] = split
        return out

    def ref(self, obj: object) -> str:
        module = getattr(obj, "__module__", None) or ""
        qual = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
        if not isinstance(qual, str) or "<" in qual:
            raise NotExpressible(f"{obj!r} cannot be imported by name")
        if module == "__main__":
            main = sys.modules.get("__main__")
            if getattr(main, "__file__", None) == self.target_path:
                module = self.target_module
            else:
                raise NotExpressible(f"{qual} is defined in a script")
        if module.split(".", 1)[0] in ("jax", "jaxlib", "flax", "equinox", "optax") and (
            "._" in module or module.startswith(("jax._src", "flax.linen.", "flax.nnx."))
        ):
            name = getattr(obj, "__name__", "")
            for home in _PUBLIC:
                found = sys.modules.get(home)
                if found is not None and getattr(found, name, None) is obj:
                    return f"{home}:{name}"
        return f"{module}:{qual}"

    def equinox(self, module: object, depth: int) -> dict[str, object]:
        """An Equinox module passed as a value (a kernel given to a combinator, a field made by a
        ``default_factory``) as its class called with the arguments it was made with: those the
        run saw its ``__init__`` take, or, for a dataclass ``__init__``, its fields."""
        args, kwargs = equinox_arguments(module, self.constructed(module) if self.constructed else None, None)
        return self.called(type(module), args, kwargs, depth)

    def nnx(self, value: object, depth: int) -> dict[str, object]:
        """An NNX module passed as a value (a model given to an evaluation helper) as its class
        called with what the run saw its ``__init__`` take; its ``nnx.Rngs`` as a fresh one with
        the same streams (the shapes do not depend on the seeds)."""
        cls = type(value)
        if _nnx_class(value, "Rngs"):
            streams = sorted(k for k, v in vars(value).items() if type(v).__name__ == "RngStream")
            if streams == ["default"]:
                return {"ref": "flax.nnx:Rngs", "args": [0]}
            return {"ref": "flax.nnx:Rngs", "kwargs": {k: i for i, k in enumerate(streams)}}
        made = self.constructed(value) if self.constructed else None
        if made is None:
            raise NotExpressible(f"the arguments {cls.__qualname__} was made with were not seen")
        return self.called(cls, *_bound_init(cls, made[0], made[1], None), depth)

    def called(self, cls: type, args: list[object], kwargs: dict[str, object], depth: int) -> dict[str, object]:
        """``cls`` called with these arguments, as a ref spec."""
        out: dict[str, object] = {"ref": self.ref(cls)}
        if args or not kwargs:  # ``args = []`` when none: a ref with neither is the class, not a call
            out["args"] = [self.spec(a, depth + 1) for a in args]
        if kwargs:
            out["kwargs"] = {str(k): self.spec(v, depth + 1) for k, v in kwargs.items()}
        return out

    def linen_fields(self, module: DataclassInstance, depth: int = 0) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in dataclasses.fields(module):
            if not f.init or f.name in ("parent", "name"):
                continue
            if _at_default(module, f):
                continue  # left at its default: the recipe need not say it
            out[f.name] = self.spec(getattr(module, f.name), depth + 1)
        return out


def _sharding_entries(value: object) -> list[str | list[str]]:
    """An array's split over the mesh in the recipe form (``["data", []]``, trailing unsplit
    dimensions left out), from a sharding that is part of its type (Explicit axes); [] for none."""
    spec = getattr(getattr(value, "sharding", None), "spec", None)
    if spec is None:
        return []
    out: list[str | list[str]] = []
    for entry in spec:
        if entry is None:
            out.append([])
        elif isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, tuple | list) and all(isinstance(a, str) for a in entry):
            out.append(list(entry) if len(entry) != 1 else entry[0])
        else:
            raise NotExpressible(f"a sharding entry {entry!r}")
    while out and out[-1] == []:
        out.pop()
    return out


def _at_default(obj: object, f: dataclasses.Field[object]) -> bool:
    """Whether ``obj``'s field ``f`` holds its (plain) default: the very object, or an equal one."""
    if f.default is dataclasses.MISSING:
        return False
    value = getattr(obj, f.name)
    try:
        return value is f.default or (type(value) is type(f.default) and bool(value == f.default))
    except Exception:
        return False


def equinox_arguments(module: object, made: Arguments | None, skip: str | None) -> Arguments:
    """The arguments that make ``module`` again: ``made`` (what its ``__init__`` was seen to take)
    by name, or its fields when its ``__init__`` is the one the dataclass wrote (fields at their
    plain default left out); ``skip``: the argument the worker fills itself."""
    cls = type(module)
    if made is not None:
        return _bound_init(cls, made[0], made[1], skip)
    if dataclasses.is_dataclass(module) and _generated_init(cls):
        fields = [f for f in dataclasses.fields(module) if f.init and f.name != skip and not _at_default(module, f)]
        return [], {f.name: getattr(module, f.name) for f in fields}
    raise NotExpressible(f"the arguments {cls.__qualname__} was made with were not seen")


def _init_from_attributes(obj: object) -> Arguments:
    """The arguments of ``type(obj).__init__`` read from the attributes of the same names (those
    at the parameter's plain default left out), for a class whose ``__init__`` keeps each of its
    parameters under its own name; NotExpressible when one without a default is not kept."""
    try:
        signature = inspect.signature(getattr(type(obj), "__init__"))  # noqa: B009  (the class's own, unbound)
    except (TypeError, ValueError) as error:
        raise NotExpressible(f"the parameters of {type(obj).__qualname__}") from error
    args: list[object] = []
    kwargs: dict[str, object] = {}
    skipped = False  # a positional-only parameter left at its default: the next cannot follow
    for name, param in list(signature.parameters.items())[1:]:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        value = getattr(obj, name, inspect.Parameter.empty)
        if value is inspect.Parameter.empty or _is_default(value, param.default):
            if param.default is inspect.Parameter.empty:
                raise NotExpressible(f"{type(obj).__qualname__} does not keep its parameter {name}")
            skipped = skipped or param.kind is inspect.Parameter.POSITIONAL_ONLY
        elif param.kind is inspect.Parameter.POSITIONAL_ONLY:
            if skipped:
                raise NotExpressible(f"{type(obj).__qualname__}'s positional parameters")
            args.append(value)
        else:
            kwargs[name] = value
    return args, kwargs


def _is_default(value: object, default: object) -> bool:
    """Whether ``value`` is a parameter's plain ``default``: the very object, or an equal one."""
    if default is inspect.Parameter.empty:
        return False
    try:
        return value is default or (type(value) is type(default) and bool(value == default))
    except Exception:
        return False


def _generated_init(cls: type) -> bool:
    """Whether ``cls.__init__`` is the one ``dataclasses`` wrote (its fields are its parameters),
    not one the class (or a base) defines."""
    code = getattr(getattr(cls, "__init__", None), "__code__", None)
    return code is not None and code.co_filename == "<string>"


def _is_equinox(value: object) -> bool:
    eqx = sys.modules.get("equinox")
    return eqx is not None and isinstance(value, eqx.Module)


def _is_nnx(value: object) -> bool:
    """An NNX module, or the ``nnx.Rngs`` one is made with."""
    return _nnx_class(value, "Module") or _nnx_class(value, "Rngs")


def _nnx_class(value: object, name: str) -> bool:
    nnx = sys.modules.get("flax.nnx")
    cls = getattr(nnx, name, None) if nnx is not None else None
    return isinstance(cls, type) and isinstance(value, cls)


def _is_array(value: object) -> TypeGuard[jax.ShapeDtypeStruct | jax.Array | np.ndarray]:
    import jax
    import numpy as np

    return isinstance(value, jax.ShapeDtypeStruct | jax.Array | np.ndarray)


def _is_numpy_dtype(value: object) -> bool:
    import numpy as np

    return isinstance(value, np.dtype)


def _is_jax_callable(value: object) -> bool:
    library = type(value).__module__.split(".", 1)[0] in ("jax", "jaxlib")
    return callable(value) and library and hasattr(value, "__name__")


def _is_linen(value: object) -> TypeGuard[DataclassInstance]:  # a Linen module is a dataclass
    linen = sys.modules.get("flax.linen")
    return linen is not None and isinstance(value, linen.Module)


def _is_config(value: object) -> TypeGuard[DataclassInstance]:
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and not _is_module(value)


def _is_module(value: object) -> bool:
    for name, attr in (("flax.nnx", "Module"), ("equinox", "Module"), ("flax.linen", "Module")):
        lib = sys.modules.get(name)
        if lib is not None and isinstance(value, getattr(lib, attr)):
            return True
    return False


def _bound_init(cls: type, args: list[object], kwargs: dict[str, object], skip: str | None) -> Arguments:
    """The constructor's arguments by name (positional-only ones stay positional), without ``skip``."""
    try:
        signature = inspect.signature(getattr(cls, "__init__"))  # noqa: B009  (the class's own, unbound)
        bound = signature.bind(None, *args, **kwargs)
    except (TypeError, ValueError):
        if skip is not None:
            kwargs = {k: v for k, v in kwargs.items() if k != skip}
        return list(args), dict(kwargs)
    out_args: list[object] = []
    out_kwargs: dict[str, object] = {}
    for i, (name, value) in enumerate(bound.arguments.items()):
        if i == 0 or name == skip:
            continue
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.POSITIONAL_ONLY:
            out_args.append(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            out_args.extend(value)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            out_kwargs.update(value)
        else:
            out_kwargs[name] = value
    return out_args, out_kwargs


def profile_table(
    kind: str,
    obj: object,
    init: Arguments | None,
    args: list[object],
    kwargs: dict[str, object],
    profile: Mapping[str, object],
    target_path: str,
    target_name: str,
    constructed: Constructed | None = None,
) -> dict[str, object] | None:
    """The ``[profiles.NAME]`` table (without ``target``) for the call, or None. ``constructed``:
    what the run saw a module passed as a value made with (an Equinox kernel given to a combinator)."""
    from jaxlsp.worker.loading.loading import module_name_for

    conv = Converter(target_path, module_name_for(target_path)[0], constructed)
    table: dict[str, object] = {"kind": kind}
    try:
        if kind == "linen":
            fields = conv.linen_fields(cast("DataclassInstance", obj))  # a Linen module: a dataclass
            if fields:
                table["init"] = {"kwargs": fields}
        elif kind in ("nnx", "equinox"):
            skip = _FILLED_BY_WORKER[kind]
            if init is not None:
                init_args, init_kwargs = _bound_init(type(obj), init[0], init[1], skip)
            elif kind == "equinox":
                init_args, init_kwargs = equinox_arguments(obj, None, skip)
            else:
                return None  # an instance whose constructor arguments were not seen
            made = conv.call(init_args, init_kwargs)
            if made:
                table["init"] = made
        table["inputs"] = conv.call(args, kwargs)
    except NotExpressible:
        return None
    for key in ("rngs", "mutable", "method"):
        if profile.get(key):
            table[key] = profile[key]
    if conv.wide or ran_with_x64():
        table["x64"] = True  # as the call ran: Python numbers and defaults are 64-bit under it
    mesh = surrounding_mesh()
    if mesh is not None:
        table["mesh"] = mesh
    return table


def ran_with_x64() -> bool:
    """Whether JAX's 64-bit types are on where the call runs (a test may turn them on)."""
    return bool(_flag("jax_enable_x64"))


def _flag(name: str) -> object:
    """A JAX configuration value as it is where the call runs (a context manager's included)."""
    import jax

    return getattr(jax.config, name, None)  # not read(): flags with a context manager refuse it


def surrounding_mesh() -> dict[str, object] | None:
    """The mesh the call runs under (``with jax.set_mesh(mesh):``) in the recipe form, ``{ axes =
    {...}, types = ... }``; None without one."""
    import jax

    try:
        mesh = jax.sharding.get_abstract_mesh()
    except Exception:
        return None
    if mesh is None or getattr(mesh, "empty", True):
        return None
    names = [str(n) for n in mesh.axis_names]
    out: dict[str, object] = {"axes": {n: int(s) for n, s in zip(names, mesh.axis_sizes, strict=True)}}
    auto = [n for n, t in zip(names, getattr(mesh, "axis_types", ()), strict=False) if "Auto" in str(t)]
    if auto and len(auto) == len(names):
        out["types"] = "auto"
    elif auto:
        out["types"] = {n: "auto" for n in auto}
    return out


def run_config() -> dict[str, object]:
    """The JAX configuration a call ran under, beyond what its table says: what a recipe cannot
    spell yet (a default matmul precision, a dtype promotion mode) is kept beside the call."""
    config: dict[str, object] = {"x64": ran_with_x64()}
    precision = _flag("jax_default_matmul_precision")
    if precision is not None:
        config["matmulPrecision"] = str(precision)
    promotion = _flag("jax_numpy_dtype_promotion")
    if promotion not in (None, "standard"):
        config["dtypePromotion"] = str(promotion)
    mesh = surrounding_mesh()
    if mesh is not None:
        config["mesh"] = mesh
    return config
