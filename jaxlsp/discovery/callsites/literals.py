"""What an expression at a call site is worth without running it: literals, shapes, dtypes, arrays
made by ``jnp.ones``-style constructors and ``jax.random``, keys, references, partials, wrappers.

:class:`Evaluator` turns libcst expressions into :data:`Value` objects, following names to the
expressions they were bound to (through :class:`~jaxlsp.discovery.callsites.namespaces.Scope` and, across
files, through the subclass's :meth:`Evaluator.global_value`). :func:`to_spec` writes a value as
a recipe input spec (the TOML form of ``docs/recipes.md``) or says why it cannot. Nothing is
imported and nothing runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import libcst as cst

from jaxlsp.discovery.callsites.namespaces import Assignment, Scope, SourceFile
from jaxlsp.discovery.summary import code_of

MAX_DEPTH = 16
_RECIPE_DTYPES = frozenset({
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "complex64",
})  # fmt: skip
_WIDE = frozenset({"float64", "int64"})
_DTYPE_ALIASES = {
    "float": "float32", "int": "int32", "bool": "bool", "complex": "complex64", "bool_": "bool",
    "float_": "float32", "int_": "int32", "single": "float32", "double": "float64", "half": "float16",
}  # fmt: skip
_ARRAY_MODULES = ("jax.numpy.", "numpy.")
_FILLERS = frozenset({"ones", "zeros", "empty", "full"})
_NUMPY_RANDOM = "numpy.random."
_JAX_RANDOM = "jax.random."
_KEY_MAKERS = frozenset({"PRNGKey", "key", "fold_in", "clone", "wrap_key_data"})
# Transforms whose result is called with the wrapped function's own arguments.
_PASS_THROUGH = frozenset({
    "jax.jit", "jax.grad", "jax.value_and_grad", "jax.checkpoint", "jax.remat", "jax.named_call",
    "flax.nnx.jit", "flax.nnx.grad", "flax.nnx.value_and_grad", "flax.nnx.remat", "flax.linen.jit",
    "equinox.filter_jit", "equinox.filter_grad", "equinox.filter_value_and_grad", "equinox.filter_checkpoint",
    "jax.experimental.pjit.pjit", "jax.pjit", "jax.make_jaxpr",
})  # fmt: skip
# Functions that call their first argument with the rest: ``jax.eval_shape(f, x)``.
CALL_WITH_REST = frozenset({"jax.eval_shape", "equinox.filter_eval_shape"})
# Transforms that map over the leading axis (in_axes = 0 by default).
_MAPS = frozenset({"jax.vmap", "flax.nnx.vmap", "equinox.filter_vmap", "jax.pmap", "equinox.filter_pmap"})
_PARTIAL = frozenset({"functools.partial", "flax.nnx.cached_partial"})
_BUILTINS = frozenset({"float", "int", "bool", "complex", "str", "None", "True", "False"})


# -- values ------------------------------------------------------------------------------------------


class Unknown:
    """A value that cannot be known statically, and why: ``why`` with ``{}`` standing for the
    code of ``node``, written out only when asked (libcst's code generation costs as much as
    parsing, and most unknown values are never shown)."""

    __slots__ = ("_node", "_why")

    def __init__(self, why: str = "{}", node: cst.CSTNode | None = None) -> None:
        self._why = why
        self._node = node

    @property
    def why(self) -> str:
        if self._node is None:
            return self._why
        return self._why.replace("{}", code_of(self._node))

    def __repr__(self) -> str:
        return f"Unknown({self.why!r})"


@dataclass(frozen=True, slots=True)
class Lit:
    """A Python scalar, a string or None."""

    value: int | float | bool | str | None


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Map:
    items: tuple[tuple[str, Value], ...]


@dataclass(frozen=True, slots=True)
class Arr:
    shape: tuple[int, ...]
    dtype: str
    generator: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Key:
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class Ref:
    """An object by name: a library one (``qual`` absolute) or a workspace definition (``path``,
    ``name`` qualified within the file; ``""`` for the module itself)."""

    qual: str
    path: Path | None = None
    name: str | None = None  # qualified within ``path``

    def same(self, path: Path, name: str) -> bool:
        return self.path is not None and self.name == name and self.path == path


@dataclass(frozen=True, slots=True)
class Built:
    """The result of calling ``callee`` (an instance, a config object, a model)."""

    callee: Value
    args: tuple[Value, ...]
    kwargs: tuple[tuple[str, Value], ...]
    path: Path
    line: int  # 1-based line of the call
    partial: bool = False  # made through a functools.partial of the callee


@dataclass(frozen=True, slots=True)
class Partial:
    func: Value
    args: tuple[Value, ...]
    kwargs: tuple[tuple[str, Value], ...]


@dataclass(frozen=True, slots=True)
class Wrapped:
    """``jax.jit(f)``, ``jax.vmap(f)``: calling it calls ``inner`` (with mapped arrays for maps)."""

    inner: Value
    transform: str
    maps: bool = False


@dataclass(frozen=True, slots=True)
class Bound:
    """``obj.attr`` of an object we know (a method of a model, ``x.astype``)."""

    obj: Value
    attr: str


Value = Unknown | Lit | Seq | Map | Arr | Key | Ref | Built | Partial | Wrapped | Bound


def dtype_name(value: Value) -> str | None:
    """``jnp.float32``, ``np.int8``, ``"bfloat16"``, ``float`` -> a dtype name; None otherwise."""
    if isinstance(value, Lit) and isinstance(value.value, str):
        name = value.value
    elif isinstance(value, Ref) and value.path is None:
        name = value.qual.rpartition(".")[2]
        if not (value.qual.startswith(("jax.numpy.", "numpy.", "jax.dtypes.")) or value.qual.startswith("builtins.")):
            return None
    else:
        return None
    return _DTYPE_ALIASES.get(name, name)


def elements(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 1


# -- evaluation ----------------------------------------------------------------------------------------


class Evaluator:
    """Evaluates expressions in scopes; :meth:`global_value` (cross-file names) is the subclass's."""

    def global_value(self, file: SourceFile, name: str, before: int | None, depth: int) -> Value:
        raise NotImplementedError

    def import_value(self, file: SourceFile, name: str, scope: Scope, depth: int) -> Value:
        raise NotImplementedError

    # -- names ------------------------------------------------------------------------------------------
    def name(self, name: str, scope: Scope, order: int, depth: int) -> Value:
        if depth > MAX_DEPTH:
            return Unknown(f"{name}: too many indirections")
        here: Scope | None = scope
        while here is not None:
            if not here.is_module:
                found = list(here.assigns.get(name, ()))
                if here is scope:
                    found = [a for a in found if a.order < order]
                if found:
                    return self.assigned(found[-1], here, depth + 1)
                if name in here.imports:
                    return self.import_value(here.file, name, here, depth + 1)
                if name in here.params:
                    return Unknown(f"{name} is a parameter of {here.owner}")
            here = here.parent
        if name in _BUILTINS:
            return {"None": Lit(None), "True": Lit(True), "False": Lit(False)}.get(name, Ref(f"builtins.{name}"))
        before = None if not scope.is_module else self.current_line
        return self.global_value(scope.file, name, before, depth + 1)

    current_line: int | None = None  # 0-based line of the module-level statement being evaluated

    def assigned(self, a: Assignment, scope: Scope, depth: int) -> Value:
        if isinstance(a.value, cst.Name) and a.value.value == "__unknown__":
            return Unknown("a loop variable")
        value = self.value(a.value, scope, a.order, depth)
        if a.index is None:
            return value
        if isinstance(value, Seq) and a.index < len(value.items):
            return value.items[a.index]
        if isinstance(value, Key):
            return value  # ``key, sub = jax.random.split(key)``
        return Unknown(f"item {a.index} of {{}}", a.value)

    # -- expressions ------------------------------------------------------------------------------------
    _values: dict[tuple[int, int, int, int | None], tuple[cst.CSTNode, Value]] | None = None

    def value(self, expr: cst.BaseExpression, scope: Scope, order: int, depth: int = 0) -> Value:
        """What ``expr`` is worth at position ``order`` of ``scope`` (memoized while
        ``self._values`` is a dict: one search, in which nothing changes)."""
        if self._values is None:
            return self._value(expr, scope, order, depth)
        key = (id(expr), id(scope), order, self.current_line)
        found = self._values.get(key)
        if found is not None and found[0] is expr:
            return found[1]
        result = self._value(expr, scope, order, depth)
        self._values[key] = (expr, result)
        return result

    def _value(self, expr: cst.BaseExpression, scope: Scope, order: int, depth: int = 0) -> Value:
        if depth > MAX_DEPTH:
            return Unknown("too many indirections")
        if isinstance(expr, cst.Integer):
            return Lit(int(expr.evaluated_value))
        if isinstance(expr, cst.Float):
            return Lit(float(expr.evaluated_value))
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
            text = expr.evaluated_value
            return Lit(text) if isinstance(text, str) else Unknown("a bytes literal")
        if isinstance(expr, cst.Name):
            return self.name(expr.value, scope, order, depth)
        if isinstance(expr, cst.Attribute):
            return self.attribute(expr, scope, order, depth)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items: list[Value] = []
            for el in expr.elements:
                if isinstance(el, cst.StarredElement):
                    inner = self.value(el.value, scope, order, depth + 1)
                    if not isinstance(inner, Seq):
                        return Unknown("*{}", el.value)
                    items.extend(inner.items)
                else:
                    items.append(self.value(el.value, scope, order, depth + 1))
            return Seq(tuple(items))
        if isinstance(expr, cst.Dict):
            pairs: list[tuple[str, Value]] = []
            for item in expr.elements:
                if not isinstance(item, cst.DictElement):
                    return Unknown("**{}", item.value)
                key = self.value(item.key, scope, order, depth + 1)
                if not isinstance(key, Lit) or not isinstance(key.value, str):
                    return Unknown("a dict key that is not a string: {}", item.key)
                pairs.append((key.value, self.value(item.value, scope, order, depth + 1)))
            return Map(tuple(pairs))
        if isinstance(expr, cst.UnaryOperation):
            inner = self.value(expr.expression, scope, order, depth + 1)
            if isinstance(expr.operator, cst.Minus) and isinstance(inner, Lit) and _number(inner.value):
                return Lit(-inner.value)  # type: ignore[operator]
            if isinstance(expr.operator, cst.Not) and isinstance(inner, Lit):
                return Lit(not inner.value)
            return Unknown(node=expr)
        if isinstance(expr, cst.BinaryOperation):
            return self.binary(expr, scope, order, depth)
        if isinstance(expr, cst.Call):
            return self.call(expr, scope, order, depth)
        if isinstance(expr, cst.Subscript):
            return self.subscript(expr, scope, order, depth)
        return Unknown(node=expr)

    def attribute(self, expr: cst.Attribute, scope: Scope, order: int, depth: int) -> Value:
        if isinstance(expr.value, cst.Name) and expr.value.value == "self" and scope.cls is not None:
            found = scope.self_attrs.get(expr.attr.value)
            if found:
                return self.assigned(found[-1], scope, depth + 1)
            return Unknown(f"self.{expr.attr.value}")
        base = self.value(expr.value, scope, order, depth + 1)
        attr = expr.attr.value
        if isinstance(base, Ref):
            return self.member(base, attr, depth + 1)
        if isinstance(base, Unknown):
            return base
        return Bound(base, attr)

    def member(self, ref: Ref, attr: str, depth: int) -> Value:
        """``ref.attr``: a library name, or a workspace definition's member (a nested class, a method)."""
        if ref.path is None:
            return Ref(f"{ref.qual}.{attr}")
        return Ref(f"{ref.qual}.{attr}", ref.path, f"{ref.name}.{attr}")

    def binary(self, expr: cst.BinaryOperation, scope: Scope, order: int, depth: int) -> Value:
        left = self.value(expr.left, scope, order, depth + 1)
        right = self.value(expr.right, scope, order, depth + 1)
        op = type(expr.operator).__name__
        if isinstance(left, Lit) and isinstance(right, Lit) and _number(left.value) and _number(right.value):
            result = _arithmetic(op, left.value, right.value)  # type: ignore[arg-type]
            return Lit(result) if result is not None else Unknown(node=expr)
        if op == "Add" and isinstance(left, Seq) and isinstance(right, Seq):
            return Seq(left.items + right.items)
        if op == "Multiply" and isinstance(left, Seq) and isinstance(right, Lit) and isinstance(right.value, int):
            return Seq(left.items * max(0, min(right.value, 1024)))
        return Unknown(node=expr)

    def subscript(self, expr: cst.Subscript, scope: Scope, order: int, depth: int) -> Value:
        base = self.value(expr.value, scope, order, depth + 1)
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return Unknown(node=expr)
        index = self.value(expr.slice[0].slice.value, scope, order, depth + 1)
        if isinstance(base, Key):
            return base  # jax.random.split(key)[0]
        if (
            isinstance(base, Seq)
            and isinstance(index, Lit)
            and isinstance(index.value, int)
            and -len(base.items) <= index.value < len(base.items)
        ):
            return base.items[index.value]
        if isinstance(base, Map) and isinstance(index, Lit):
            for k, v in base.items:
                if k == index.value:
                    return v
        return Unknown(node=expr)

    # -- calls ------------------------------------------------------------------------------------------
    def arguments(
        self, call: cst.Call, scope: Scope, order: int, depth: int
    ) -> tuple[list[Value], list[tuple[str, Value]]] | Unknown:
        args: list[Value] = []
        kwargs: list[tuple[str, Value]] = []
        for a in call.args:
            if a.star == "*":
                inner = self.value(a.value, scope, order, depth + 1)
                if not isinstance(inner, Seq):
                    return Unknown("*{}", a.value)
                args.extend(inner.items)
            elif a.star == "**":
                inner = self.value(a.value, scope, order, depth + 1)
                if not isinstance(inner, Map):
                    return Unknown("**{}", a.value)
                kwargs.extend(inner.items)
            elif a.keyword is not None:
                kwargs.append((a.keyword.value, self.value(a.value, scope, order, depth + 1)))
            else:
                args.append(self.value(a.value, scope, order, depth + 1))
        return args, kwargs

    def call(self, call: cst.Call, scope: Scope, order: int, depth: int) -> Value:
        callee = self.value(call.func, scope, order, depth + 1)
        got = self.arguments(call, scope, order, depth)
        if isinstance(got, Unknown):
            return got
        args, kwargs = got
        return self.apply(callee, args, kwargs, scope.file.path, self.line_of(call, scope), call)

    def line_of(self, call: cst.Call, scope: Scope) -> int:
        for c in scope.calls:
            if c.node is call:
                return c.line
        return scope.file.statements[scope.index].start + 1 if scope.index >= 0 else 0

    def apply(
        self, callee: Value, args: list[Value], kwargs: list[tuple[str, Value]], path: Path, line: int, node: cst.Call
    ) -> Value:
        if isinstance(callee, Partial):
            merged = dict(callee.kwargs)
            merged.update(kwargs)
            made = self.apply(callee.func, [*callee.args, *args], list(merged.items()), path, line, node)
            return replace(made, partial=True) if isinstance(made, Built) else made
        if isinstance(callee, Ref) and callee.path is None:
            library = library_call(callee.qual, args, dict(kwargs))
            if library is not None:
                return library
        if isinstance(callee, Bound) and isinstance(callee.obj, Arr):
            return array_method(callee.obj, callee.attr, args, dict(kwargs), node)
        if isinstance(callee, Unknown):
            return callee
        return Built(callee, tuple(args), tuple(kwargs), path, line)


def _arithmetic(op: str, a: float, b: float) -> float | None:
    try:
        if op == "Add":
            return a + b
        if op == "Subtract":
            return a - b
        if op == "Multiply":
            return a * b
        if op == "FloorDivide":
            return a // b
        if op == "Divide":
            return a / b
        if op == "Modulo":
            return a % b
        if op == "Power" and abs(b) < 64:
            result: float = a**b
            return result
    except (ArithmeticError, TypeError):
        return None
    return None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ints(value: Value) -> tuple[int, ...] | None:
    """A shape: an int or a sequence of non-negative ints."""
    if isinstance(value, Lit) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return (value.value,) if value.value >= 0 else None
    if isinstance(value, Seq):
        out = []
        for item in value.items:
            if not (isinstance(item, Lit) and isinstance(item.value, int)) or isinstance(item.value, bool):
                return None
            if item.value < 0:
                return None
            out.append(item.value)
        return tuple(out)
    return None


def _pick(args: list[Value], kwargs: dict[str, Value], index: int, name: str) -> Value | None:
    if name in kwargs:
        return kwargs[name]
    return args[index] if index < len(args) else None


def _dtype_of(value: Value | None, default: str) -> str | Unknown:
    if value is None or (isinstance(value, Lit) and value.value is None):
        return default
    name = dtype_name(value)
    if name is None:
        return Unknown("a dtype that is not a literal")
    return name


def _literal_dtype(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int32"
    return "float32"


def _nested_shape(value: Value) -> tuple[tuple[int, ...], str] | None:
    """The shape and dtype of ``jnp.array([[1, 2], [3, 4]])``'s literal."""
    if isinstance(value, Lit) and (_number(value.value) or isinstance(value.value, bool)):
        return (), _literal_dtype(value.value)
    if isinstance(value, Seq):
        inner = [_nested_shape(item) for item in value.items]
        if not inner or any(i is None for i in inner):
            return ((0,), "float32") if not inner else None
        shapes = {i[0] for i in inner if i is not None}
        if len(shapes) != 1:
            return None
        dtypes = {i[1] for i in inner if i is not None}
        dtype = "float32" if "float32" in dtypes else dtypes.pop()
        return (len(inner), *shapes.pop()), dtype
    return None


def library_call(qual: str, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """Arrays, keys, partials and wrappers made by library functions; None for anything else."""
    if qual in _PARTIAL:
        if not args:
            return Unknown("partial() with no function")
        return Partial(args[0], tuple(args[1:]), tuple(kwargs.items()))
    if qual in _PASS_THROUGH or qual in _MAPS:
        if not args:
            return Unknown(f"{qual}() with no function")
        axes = kwargs.get("in_axes")
        if qual in _MAPS and axes is not None and not (isinstance(axes, Lit) and axes.value == 0):
            return Unknown(f"{qual} with in_axes other than 0")
        return Wrapped(args[0], qual, qual in _MAPS)
    if qual in ("jax.ShapeDtypeStruct", "jax.core.ShapeDtypeStruct"):
        shape = _ints(_pick(args, kwargs, 0, "shape") or Unknown(""))
        dtype = _dtype_of(_pick(args, kwargs, 1, "dtype"), "float32")
        if shape is None or isinstance(dtype, Unknown):
            return Unknown("a ShapeDtypeStruct whose shape or dtype is not a literal")
        return Arr(shape, dtype)
    for prefix in _ARRAY_MODULES:
        if qual.startswith(prefix) and "." not in qual[len(prefix) :]:
            return _array_constructor(qual[len(prefix) :], args, kwargs, numpy=prefix == "numpy.")
    if qual.startswith(_JAX_RANDOM):
        return _jax_random(qual[len(_JAX_RANDOM) :], args, kwargs)
    if qual.startswith(_NUMPY_RANDOM):
        return _numpy_random(qual[len(_NUMPY_RANDOM) :], args, kwargs)
    return None


def _array_constructor(fn: str, args: list[Value], kwargs: dict[str, Value], numpy: bool) -> Value | None:
    if fn in _FILLERS:
        shape = _ints(_pick(args, kwargs, 0, "shape") or Unknown(""))
        if shape is None:
            return Unknown(f"the shape of {fn}() is not a literal")
        if fn == "full":
            fill = _pick(args, kwargs, 1, "fill_value")
            if not (isinstance(fill, Lit) and (_number(fill.value) or isinstance(fill.value, bool))):
                return Unknown("the fill value of full() is not a literal")
            dtype = _dtype_of(_pick(args, kwargs, 2, "dtype"), _literal_dtype(fill.value))
            gen: tuple[tuple[str, Any], ...] = (("kind", "full"), ("value", fill.value))
        else:
            dtype = _dtype_of(_pick(args, kwargs, 1, "dtype"), "float32")
            gen = (("kind", "zeros" if fn == "empty" else fn),)
        if isinstance(dtype, Unknown):
            return dtype
        return Arr(shape, dtype, gen)
    if fn == "arange":
        numbers = [a for a in args[:3]]
        if not numbers or not all(isinstance(n, Lit) and _number(n.value) for n in numbers):
            return Unknown("arange() bounds that are not literals")
        values = [float(n.value) if isinstance(n.value, float) else int(n.value) for n in numbers if isinstance(n, Lit)]  # type: ignore[arg-type]
        start: float
        stop: float
        step: float
        if len(values) == 1:
            start, stop, step = 0, values[0], 1
        else:
            start, stop, step = values[0], values[1], values[2] if len(values) > 2 else 1
        if not step:
            return Unknown("arange() with step 0")
        count = max(0, math.ceil((stop - start) / step))
        default = "float32" if any(isinstance(v, float) for v in values) else "int32"
        dtype = _dtype_of(kwargs.get("dtype"), default)
        if isinstance(dtype, Unknown):
            return dtype
        return Arr((count,), dtype, (("kind", "arange"), ("start", start), ("step", step)))
    if fn in ("array", "asarray"):
        data = _pick(args, kwargs, 0, "object")
        found = _nested_shape(data) if data is not None else None
        if found is None:
            return Unknown(f"the data of {fn}() is not a literal")
        shape, inferred = found
        dtype = _dtype_of(_pick(args, kwargs, 1, "dtype"), inferred)
        if isinstance(dtype, Unknown):
            return dtype
        return Arr(shape, dtype)
    if fn == "linspace":
        num = kwargs.get("num", args[2] if len(args) > 2 else Lit(50))
        if not (isinstance(num, Lit) and isinstance(num.value, int)):
            return Unknown("linspace() with a count that is not a literal")
        return Arr((num.value,), "float32")
    if fn in ("ones_like", "zeros_like", "empty_like", "full_like"):
        like = _pick(args, kwargs, 0, "a")
        if isinstance(like, Arr):
            return Arr(like.shape, like.dtype)
        return Unknown(f"{fn}() of a value that is not known")
    return None


def _jax_random(fn: str, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    if fn in _KEY_MAKERS:
        seed = _pick(args, kwargs, 0, "seed")
        if fn in ("PRNGKey", "key") and isinstance(seed, Lit) and isinstance(seed.value, int):
            return Key(seed.value)
        return Key()
    if fn == "split":
        count = _pick(args, kwargs, 1, "num")
        n = count.value if isinstance(count, Lit) and isinstance(count.value, int) else 2
        return Seq(tuple(Key() for _ in range(max(0, min(n, 64)))))
    # (key, shape-position, dtype default, generator)
    shape_at = {
        "normal": (1, "float32", "normal"),
        "uniform": (1, "float32", "uniform"),
        "truncated_normal": (3, "float32", "normal"),
        "randint": (1, "int32", "randint"),
        "bernoulli": (2, "bool", "zeros"),
        "gumbel": (1, "float32", "normal"),
        "laplace": (1, "float32", "normal"),
        "logistic": (1, "float32", "normal"),
        "rademacher": (1, "int32", "zeros"),
        "choice": (2, "int32", "zeros"),
        "categorical": (None, "int32", "zeros"),
        "permutation": (None, "int32", "zeros"),
    }
    spec = shape_at.get(fn)
    if spec is None:
        return None
    index, default, kind = spec
    if index is None:
        return Unknown(f"the shape of jax.random.{fn}() depends on its arguments")
    given = _pick(args, kwargs, index, "shape")
    shape = () if given is None or (isinstance(given, Lit) and given.value is None) else _ints(given)
    if shape is None:
        return Unknown(f"the shape of jax.random.{fn}() is not a literal")
    dtype_at = {"normal": 2, "uniform": 2, "truncated_normal": 4, "randint": 4}.get(fn)
    dtype = _dtype_of(_pick(args, kwargs, dtype_at if dtype_at is not None else 99, "dtype"), default)
    if isinstance(dtype, Unknown):
        return dtype
    gen: list[tuple[str, Any]] = [("kind", kind)]
    if kind == "uniform":
        for key, name in (("low", "minval"), ("high", "maxval")):
            bound = kwargs.get(name)
            if isinstance(bound, Lit) and _number(bound.value):
                gen.append((key, bound.value))
    if kind == "randint":
        low, high = _pick(args, kwargs, 2, "minval"), _pick(args, kwargs, 3, "maxval")
        bounds = [b.value if isinstance(b, Lit) else None for b in (low, high)]
        if not all(isinstance(b, int) for b in bounds):
            return Arr(shape, dtype)
        gen += [("low", bounds[0]), ("high", bounds[1])]
    floating = dtype in ("float16", "bfloat16", "float32", "float64")
    if kind == "zeros" or (not floating and kind in ("normal", "uniform")):
        gen = []
    return Arr(shape, dtype, tuple(gen))


def _numpy_random(fn: str, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    if fn in ("rand", "randn"):
        dims = _ints(Seq(tuple(args)))
        if dims is None:
            return Unknown(f"numpy.random.{fn}() dimensions that are not literals")
        return Arr(dims, "float32", (("kind", "uniform" if fn == "rand" else "normal"),))
    positions = {"normal": 2, "uniform": 2, "randint": 2, "random": 0, "random_sample": 0, "standard_normal": 0}
    if fn not in positions:
        return None
    given = _pick(args, kwargs, positions[fn], "size")
    shape = () if given is None else _ints(given)
    if shape is None:
        return Unknown(f"the size of numpy.random.{fn}() is not a literal")
    if fn == "randint":
        return Arr(shape, "int32")
    return Arr(shape, "float32", (("kind", "uniform" if fn in ("uniform", "random", "random_sample") else "normal"),))


def array_method(arr: Arr, attr: str, args: list[Value], kwargs: dict[str, Value], node: cst.Call) -> Value:
    if attr == "astype":
        dtype = _dtype_of(_pick(args, kwargs, 0, "dtype"), arr.dtype)
        return dtype if isinstance(dtype, Unknown) else Arr(arr.shape, dtype, arr.generator)
    if attr == "reshape":
        wanted = _ints(args[0]) if len(args) == 1 and isinstance(args[0], Seq) else _ints(Seq(tuple(args)))
        raw = args[0] if len(args) == 1 and isinstance(args[0], Seq) else Seq(tuple(args))
        if wanted is None and isinstance(raw, Seq):
            dims = [d.value if isinstance(d, Lit) and isinstance(d.value, int) else None for d in raw.items]
            if dims.count(-1) == 1 and all(d is not None for d in dims):
                known = math.prod(d for d in dims if d != -1)  # type: ignore[misc]
                if known and elements(arr.shape) % known == 0:
                    wanted = tuple(elements(arr.shape) // known if d == -1 else d for d in dims)  # type: ignore[misc]
        if wanted is None or elements(wanted) != elements(arr.shape):
            return Unknown("{}: a reshape that is not literal", node)
        return Arr(wanted, arr.dtype, arr.generator)
    if attr in ("copy", "block_until_ready"):
        return arr
    return Unknown(node=node)


# -- specs ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spec:
    """A value written as a recipe input spec, with what the limits count."""

    spec: Any
    arrays: int = 0
    elements: int = 0
    wide: bool = False


def ref_text(qual: str) -> str:
    """``flax.linen.relu`` -> ``flax.linen:relu``; ``mod.Enum.VALUE`` -> ``mod:Enum.VALUE``: the module
    part ends before the first capitalised name, else before the last name."""
    parts = qual.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part[:1].isupper():
            return ".".join(parts[:i]) + ":" + ".".join(parts[i:])
    if len(parts) == 1:
        return f"builtins:{qual}"
    return ".".join(parts[:-1]) + ":" + parts[-1]
