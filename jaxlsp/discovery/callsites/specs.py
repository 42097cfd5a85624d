"""Values at a call site written as recipe input specs (the TOML form of docs/recipes.md).

:class:`SpecWriter` turns an evaluated :data:`~jaxlsp.discovery.callsites.literals.Value` into an input spec
(arrays, keys, Python values, pytrees, references, calls of classes by reference) or says why it
cannot be written: a workspace function's result (which may load data), an attribute of an
object, a module that is not a Python name.
"""

from __future__ import annotations

from typing import Any

from jaxlsp.discovery.callsites.literals import (
    Arr,
    Built,
    Key,
    Lit,
    Map,
    Partial,
    Ref,
    Seq,
    Unknown,
    Value,
    elements,
    ref_text,
)
from jaxlsp.discovery.index import WorkspaceIndex

_WIDE = frozenset({"float64", "int64"})
_RECIPE_DTYPES = frozenset({
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "complex64",
})  # fmt: skip
_PURE_LIBRARIES = frozenset({"jax", "flax", "optax", "equinox", "functools", "operator", "math"})


class SpecWriter:
    """Writes values as input specs; workspace references are named by the index's module names."""

    def __init__(self, index: WorkspaceIndex) -> None:
        self.index = index

    def spec(self, value: Value, depth: int = 0) -> tuple[Any, int, bool] | Unknown:
        """``value`` as a recipe input spec: ``(spec, array elements, 64-bit)``, or why it cannot be."""
        if depth > 12:
            return Unknown("nested too deeply")
        if isinstance(value, Lit):
            if value.value is None:
                return {"kind": "none"}, 0, False
            if isinstance(value.value, float) and (value.value != value.value or abs(value.value) == float("inf")):
                return Unknown("a number that is not finite")
            return value.value, 0, False
        if isinstance(value, Arr):
            if value.dtype not in _RECIPE_DTYPES:
                return Unknown(f"dtype {value.dtype} cannot be written in a recipe")
            arr: dict[str, Any] = {"kind": "array", "shape": list(value.shape)}
            if value.dtype != "float32":
                arr["dtype"] = value.dtype
            gen = dict(value.generator)
            if gen and generator_fits(gen, value.dtype):
                arr["generator"] = gen
            return arr, elements(value.shape), value.dtype in _WIDE
        if isinstance(value, Key):
            return ({"kind": "key", "seed": value.seed} if value.seed is not None else {"kind": "key"}), 0, False
        if isinstance(value, Seq):
            items: list[Any] = []
            count, wide = 0, False
            for item in value.items:
                got = self.spec(item, depth + 1)
                if isinstance(got, Unknown):
                    return got
                items.append(got[0])
                count, wide = count + got[1], wide or got[2]
            return items, count, wide
        if isinstance(value, Map):
            table: dict[str, Any] = {}
            count, wide = 0, False
            for k, item in value.items:
                if k in ("kind", "ref"):
                    return Unknown(f"a dict with a {k!r} key reads as an input spec")
                got = self.spec(item, depth + 1)
                if isinstance(got, Unknown):
                    return got
                table[k] = got[0]
                count, wide = count + got[1], wide or got[2]
            return table, count, wide
        if isinstance(value, Ref):
            if value.name == "":
                return Unknown(f"the module {value.qual} as a value")
            if not self.writable(value):
                return Unknown(f"{value.qual}: its module's name is not a Python name")
            if not importable(value.name if value.path is not None else value.qual):
                return Unknown(
                    f"{value.qual.rsplit('.', 2)[-2:][0]}.{value.qual.rsplit('.', 1)[-1]}: an attribute of an object"
                )
            return {"ref": self.ref(value)}, 0, False
        if isinstance(value, Partial):
            return self.ref_call("functools:partial", [value.func, *value.args], list(value.kwargs), depth)
        if isinstance(value, Built):
            callee = value.callee
            if not isinstance(callee, Ref):
                if isinstance(callee, Partial):
                    return self.ref_call("functools:partial", [callee.func, *callee.args], list(callee.kwargs), depth)
                return Unknown(f"the result of a call at line {value.line}")
            if not self.constructible(callee) or not self.writable(callee):
                return Unknown(f"the result of {callee.qual.rpartition('.')[2]}(...) at line {value.line}")
            kwargs = list(value.kwargs)
            kwargs += self.defaults(callee, len(value.args), {k for k, _ in kwargs})
            return self.ref_call(self.ref(callee), list(value.args), kwargs, depth)
        if isinstance(value, Unknown):
            return value
        return Unknown("a value that is not a literal")

    def ref_call(
        self, ref: str, args: list[Value], kwargs: list[tuple[str, Value]], depth: int
    ) -> tuple[Any, int, bool] | Unknown:
        out: dict[str, Any] = {"ref": ref}
        count, wide = 0, False
        if args:
            items = self.spec(Seq(tuple(args)), depth + 1)
            if isinstance(items, Unknown):
                return items
            out["args"], count, wide = items[0], items[1], items[2]
        if kwargs or not args:
            table = self.spec(Map(tuple(kwargs)), depth + 1)
            if isinstance(table, Unknown):
                return table
            out["kwargs"] = table[0]
            count, wide = count + table[1], wide or table[2]
        return out, count, wide

    def constructible(self, callee: Ref) -> bool:
        """Whether a recipe may call ``callee`` to rebuild a value: a class (a config, a module, an
        RNG container), or a function of JAX's own libraries; never a workspace function or
        another library's, which may load data or do any amount of work."""
        last = (callee.name or callee.qual).rpartition(".")[2]
        if callee.path is not None:
            fs = self.index.summary(callee.path)
            return fs is not None and (callee.name or "").split(".", 1)[0] in fs.classes
        return last[:1].isupper() or callee.qual.split(".", 1)[0] in _PURE_LIBRARIES

    def ref(self, value: Ref) -> str:
        if value.path is not None and value.name is not None:
            return f"{self.index.modules.module_name(value.path)}:{value.name}"
        return ref_text(value.qual)

    def writable(self, value: Ref) -> bool:
        """A ``ref`` recipes accept: dotted Python names (``02_toy.py`` cannot be imported by name)."""
        module, _, name = self.ref(value).partition(":")
        return all(p.isidentifier() for p in (*module.split("."), *name.split(".")))

    def defaults(self, callee: Ref, positional: int, given: set[str]) -> list[tuple[str, Value]]:
        """Literal defaults of a workspace dataclass's fields that the call leaves out (a config
        object shows all of its values, as a proposal does)."""
        if callee.path is None or callee.name is None or "." in callee.name:
            return []
        fs = self.index.summary(callee.path)
        found = fs.classes.get(callee.name) if fs is not None else None
        if found is None:
            return []
        cls = found[1]
        decorated = any(d.callee and d.callee.split(".")[-1] in ("dataclass", "struct") for d in cls.decorators)
        if not decorated and not any(b.split(".")[-1] in ("NamedTuple", "PyTreeNode", "Struct") for b in cls.bases):
            return []
        out: list[tuple[str, Value]] = []
        for i, f in enumerate(cls.linen_fields):
            if i < positional or f.name in given or f.default is None:
                continue
            value = literal_default(f.default)
            if value is not None:
                out.append((f.name, value))
        return out


def importable(dotted: str | None) -> bool:
    """Whether a name can be a recipe ``ref``: module attributes, classes nested in classes, enum
    members (``mod.Enum.MEMBER``), never an attribute of an object (``FLAGS.config``, ``cfg.dim``):
    once a part is capitalised, every later part must be too."""
    capitalised = False
    for part in (dotted or "").split("."):
        if capitalised and not part[:1].isupper():
            return False
        capitalised = capitalised or part[:1].isupper()
    return True


def generator_fits(gen: dict[str, Any], dtype: str) -> bool:
    kind = gen.get("kind")
    floating = dtype in ("float16", "bfloat16", "float32", "float64")
    if kind in ("normal", "uniform"):
        return floating
    if kind == "randint":
        return dtype.startswith(("int", "uint")) and "low" in gen and "high" in gen and gen["high"] > gen["low"]
    if kind == "arange":
        return dtype != "bool"
    if kind == "full":
        value = gen.get("value")
        if dtype == "bool":
            return isinstance(value, bool)
        if dtype.startswith(("int", "uint")):
            return isinstance(value, int) and not isinstance(value, bool)
        return not isinstance(value, bool)
    return kind in ("zeros", "ones")


def literal_default(text: str) -> Value | None:
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, (bool, int, float, str)):
        return Lit(value)
    if isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return Seq(tuple(Lit(v) for v in value))
    return None
