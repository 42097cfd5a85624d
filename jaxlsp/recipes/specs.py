"""Input specs (DESIGN.md §3): TOML values in, the worker protocol's InputSpec JSON out.

``{kind = "array", ...}``, ``{kind = "key"}``, ``{kind = "none"}``, ``{ref = "module:Name"}``,
Python scalars and strings (static), and lists and tables without ``kind``/``ref`` (pytrees).
Named dimensions are replaced by their sizes, symbolic ones kept, unknown ones recorded as
needed; every array's element count and 64-bit dtype is recorded for the limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from jaxlsp.recipes import schema
from jaxlsp.recipes.problems import KeyPath
from jaxlsp.recipes.schema import show


@dataclass(slots=True)
class Context:
    """What checking one profile accumulates."""

    seed: int = 0
    dims: dict[str, int] = field(default_factory=dict)
    symbolic: frozenset[str] = frozenset()
    problems: list[tuple[KeyPath, str]] = field(default_factory=list)
    missing_dims: dict[str, list[KeyPath]] = field(default_factory=dict)
    missing_shapes: list[KeyPath] = field(default_factory=list)
    arrays: list[tuple[KeyPath, int, list[int | str]]] = field(default_factory=list)  # path, elements, shape
    wide: list[tuple[KeyPath, str]] = field(default_factory=list)  # dtype key path, dtype
    mesh: dict[str, int] | None = None  # the profile's mesh axes and sizes, for the arrays' shardings
    mesh_path: KeyPath | None = None  # where the mesh is (a problem with it: the shardings are not checked)

    def error(self, path: KeyPath, message: str) -> None:
        self.problems.append((path, message))

    def unknown_keys(self, path: KeyPath, table: dict[str, Any], allowed: tuple[str, ...]) -> None:
        for key in table:
            if key not in allowed:
                self.error((*path, key), schema.suggest(key, allowed))


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_seed(ctx: Context, path: KeyPath, value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= schema.MAX_SEED:
        return value
    ctx.error(path, f"expected an integer from 0 to {schema.MAX_SEED}, got {show(value)}")
    return None


def check_ref_name(ctx: Context, path: KeyPath, value: object, what: str) -> str | None:
    """``module:Name`` with a dotted module and a dotted name."""
    if isinstance(value, str):
        module, sep, name = value.partition(":")
        if sep and schema.DOTTED.fullmatch(module) and schema.DOTTED.fullmatch(name):
            return value
    ctx.error(path, f'expected "module:{what}" (dotted Python names), got {show(value)}')
    return None


def check_spec(ctx: Context, path: KeyPath, value: object) -> Any:
    """One input spec; None (and a problem recorded) when it is wrong."""
    if isinstance(value, bool) or is_int(value) or isinstance(value, str):
        return {"kind": "static", "value": value}
    if isinstance(value, float):
        if not math.isfinite(value):
            ctx.error(path, f"expected a finite number, got {show(value)}")
            return None
        return {"kind": "static", "value": value}
    if isinstance(value, list):
        return {"kind": "list", "items": [check_spec(ctx, (*path, i), item) for i, item in enumerate(value)]}
    if isinstance(value, dict):
        if "kind" in value and "ref" in value:
            ctx.error((*path, "ref"), "a table has either kind or ref, not both")
            return None
        if "ref" in value:
            return _ref(ctx, path, value)
        if "kind" in value:
            kind = value["kind"]
            if kind == "array":
                return _array(ctx, path, value)
            if kind == "key":
                return _key(ctx, path, value)
            if kind == "none":
                ctx.unknown_keys(path, value, schema.NONE_KEYS)
                return {"kind": "none"}
            ctx.error((*path, "kind"), f"expected one of {schema.one_of(schema.SPEC_KINDS)}, got {show(kind)}")
            return None
        return {"kind": "dict", "items": {k: check_spec(ctx, (*path, k), v) for k, v in value.items()}}
    ctx.error(path, f"expected an input spec, a scalar, a string, a list or a table, got {show(value)}")
    return None


def check_args(ctx: Context, path: KeyPath, value: object) -> list[Any]:
    if not isinstance(value, list):
        ctx.error(path, f"expected a list of input specs, got {show(value)}")
        return []
    return [check_spec(ctx, (*path, i), item) for i, item in enumerate(value)]


def check_kwargs(ctx: Context, path: KeyPath, value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        ctx.error(path, f"expected a table of input specs, got {show(value)}")
        return {}
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not schema.IDENTIFIER.fullmatch(key):
            ctx.error((*path, key), "expected a Python identifier as a keyword argument's name")
        out[key] = check_spec(ctx, (*path, key), item)
    return out


def _ref(ctx: Context, path: KeyPath, table: dict[str, Any]) -> Any:
    ctx.unknown_keys(path, table, schema.REF_KEYS)
    ref = check_ref_name(ctx, (*path, "ref"), table["ref"], "Name")
    out: dict[str, Any] = {"kind": "ref", "ref": ref}
    if "args" in table:
        out["args"] = check_args(ctx, (*path, "args"), table["args"])
    if "kwargs" in table:
        out["kwargs"] = check_kwargs(ctx, (*path, "kwargs"), table["kwargs"])
    return out


def _key(ctx: Context, path: KeyPath, table: dict[str, Any]) -> Any:
    ctx.unknown_keys(path, table, schema.KEY_KEYS)
    seed: int | None = ctx.seed
    if "seed" in table:
        seed = check_seed(ctx, (*path, "seed"), table["seed"])
    out: dict[str, Any] = {"kind": "key", "seed": seed}
    legacy = table.get("legacy", False)
    if not isinstance(legacy, bool):
        ctx.error((*path, "legacy"), f"expected true or false, got {show(legacy)}")
    elif legacy:
        out["legacy"] = True
    if "impl" in table:
        impl = table["impl"]
        if impl not in schema.KEY_IMPLS:
            ctx.error((*path, "impl"), f"expected one of {schema.one_of(schema.KEY_IMPLS)}, got {show(impl)}")
        elif legacy is True:
            ctx.error((*path, "impl"), "a legacy key is a raw uint32[2] threefry key; drop impl or legacy")
        else:
            out["impl"] = impl
    return out


def _array(ctx: Context, path: KeyPath, table: dict[str, Any]) -> Any:
    ctx.unknown_keys(path, table, schema.ARRAY_KEYS)
    dtype = table.get("dtype", "float32")
    if dtype not in schema.DTYPES:
        ctx.error((*path, "dtype"), f"unsupported dtype {show(dtype)} (allowed: {', '.join(schema.DTYPES)})")
        dtype = None
    elif dtype in schema.WIDE_DTYPES:
        ctx.wide.append(((*path, "dtype"), dtype))
    shape = _shape(ctx, path, table)
    generator = _generator(ctx, (*path, "generator"), table.get("generator"), dtype)
    out: dict[str, Any] = {"kind": "array", "shape": shape, "dtype": dtype, "generator": generator}
    if "sharding" in table:
        known = isinstance(table.get("shape"), list)  # else asked for: its length is not known yet
        sharding = _sharding(ctx, (*path, "sharding"), table["sharding"], shape if known else None)
        if sharding is not None:
            out["sharding"] = sharding
    return out


def _sharding(
    ctx: Context, path: KeyPath, value: object, shape: list[int | str] | None
) -> list[list[str] | None] | None:
    """``sharding = ["data", []]``: per dimension, the mesh axis (or list of axes) it is split over,
    ``[]`` for none; dimensions past the list's end are not split (as in a ``PartitionSpec``).
    Resolved to one entry per dimension, each a list of axes or None (the graph's spelling)."""
    if ctx.mesh_path is None:
        ctx.error(path, "a sharding names mesh axes, and this profile has no mesh (mesh = { axes = { data = 4 } })")
        return None
    if not isinstance(value, list):
        ctx.error(
            path,
            f"expected a list with one entry per dimension (an axis name, a list of them, or []), got {show(value)}",
        )
        return None
    if shape is not None and len(value) > len(shape):
        ctx.error(path, f"{len(value)} entries for an array of {len(shape)} dimensions (shape {show(shape)})")
        return None
    mesh = ctx.mesh
    out: list[list[str] | None] = []
    used: set[str] = set()
    for i, entry in enumerate(value):
        where = (*path, i)
        names = [entry] if isinstance(entry, str) else entry
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            ctx.error(where, f"expected a mesh axis name, a list of them, or [] (not split), got {show(entry)}")
            out.append(None)
            continue
        if mesh is None:  # the mesh has a problem of its own: these names cannot be checked
            out.append(list(names) or None)
            continue
        bad = [n for n in names if n not in mesh]
        twice = [n for n in names if n in used or names.count(n) > 1]
        if bad:
            ctx.error(where, f"{show(bad[0])} is not an axis of the mesh (axes: {', '.join(mesh)})")
        elif twice:
            ctx.error(where, f"axis {show(twice[0])} splits more than one dimension (JAX allows each axis once)")
        else:
            parts = math.prod(mesh[n] for n in names)
            dim = shape[i] if shape is not None else None
            if is_int(dim) and dim % parts:  # type: ignore[operator]
                over = ", ".join(f"{n}: {mesh[n]}" for n in names)
                ctx.error(where, f"dimension {i} of size {dim} does not split evenly over {over} ({parts} devices)")
        used.update(names)
        out.append(list(names) or None)
    if shape is not None:
        out.extend([None] * (len(shape) - len(out)))
    return out


def _shape(ctx: Context, path: KeyPath, table: dict[str, Any]) -> list[int | str]:
    if "shape" not in table:
        ctx.missing_shapes.append((*path, "shape"))
        ctx.arrays.append((path, 1, []))  # at least one element
        return []
    value = table["shape"]
    if not isinstance(value, list):
        ctx.error((*path, "shape"), f"expected a list of positive integers and dimension names, got {show(value)}")
        return []
    shape: list[int | str] = []
    elements = 1
    for i, dim in enumerate(value):
        where = (*path, "shape", i)
        if is_int(dim) and dim > 0:
            shape.append(dim)
            elements *= dim
        elif isinstance(dim, str) and schema.IDENTIFIER.fullmatch(dim):
            if dim in ctx.symbolic:
                shape.append(dim)  # traced symbolically; counts as 1 element for the limits
            elif dim in ctx.dims:
                shape.append(ctx.dims[dim])
                elements *= ctx.dims[dim]
            else:
                ctx.missing_dims.setdefault(dim, []).append(where)
                shape.append(dim)
        else:
            ctx.error(where, f"expected a positive integer or a dimension name, got {show(dim)}")
    ctx.arrays.append((path, elements, shape))
    return shape


def _number_problem(key: str, value: object, dtype: str | None, kind: str) -> str | None:
    """Why a generator parameter does not fit the dtype, or None."""
    if dtype == "bool" and kind == "full":
        return None if isinstance(value, bool) else f"expected true or false for a bool array, got {show(value)}"
    if not is_number(value):
        return f"expected a number, got {show(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {show(value)}"
    if dtype in schema.INT_RANGES:
        if not is_int(value):
            return f"expected an integer for a {dtype} array, got {show(value)}"
        low, high = schema.INT_RANGES[dtype]
        if kind == "randint" and key == "high":
            high += 1  # exclusive
        assert isinstance(value, int)
        if not low <= value <= high:
            return f"{value} does not fit in {dtype} ({low} to {high})"
    return None


_GENERATOR_DTYPES: dict[str, tuple[str, ...]] = {
    "normal": (*schema.FLOAT_DTYPES, *schema.COMPLEX_DTYPES),
    "uniform": schema.FLOAT_DTYPES,
    "randint": schema.INT_DTYPES,
    "arange": (*schema.FLOAT_DTYPES, *schema.INT_DTYPES),
}


def _generator(ctx: Context, path: KeyPath, value: object, dtype: str | None) -> Any:
    if value is None:
        floating = dtype in (*schema.FLOAT_DTYPES, *schema.COMPLEX_DTYPES)
        return {"kind": "normal", "seed": ctx.seed} if floating else {"kind": "zeros"}
    if not isinstance(value, dict):
        ctx.error(path, f'expected a generator table such as {{ kind = "normal" }}, got {show(value)}')
        return None
    kind = value.get("kind")
    if kind not in schema.GENERATORS:
        if kind is None:
            ctx.error((*path, "kind"), f"missing (expected one of {schema.one_of(tuple(schema.GENERATORS))})")
        else:
            ctx.error((*path, "kind"), f"expected one of {schema.one_of(tuple(schema.GENERATORS))}, got {show(kind)}")
        return None
    assert isinstance(kind, str)
    required, optional = schema.GENERATORS[kind]
    ctx.unknown_keys(path, value, ("kind", *required, *optional))
    allowed_dtypes = _GENERATOR_DTYPES.get(kind)
    if dtype is not None and allowed_dtypes is not None and dtype not in allowed_dtypes:
        ctx.error(
            (*path, "kind"), f"the {kind} generator cannot fill a {dtype} array (it fills {', '.join(allowed_dtypes)})"
        )
        dtype = None
    out: dict[str, Any] = {"kind": kind}
    for key in required:
        if key not in value:
            ctx.error((*path, key), f"missing (the {kind} generator needs {' and '.join(required)})")
    for key in (*required, *optional):
        if key not in value:
            continue
        item = value[key]
        if key == "seed":
            out[key] = check_seed(ctx, (*path, key), item)
            continue
        typed = key in ("value", "low", "high") and kind != "uniform"  # uniform bounds are plain numbers
        problem = _number_problem(key, item, dtype if typed else None, kind)
        if problem is None and key == "std" and item < 0:
            problem = f"expected a number of at least 0, got {show(item)}"
        if problem is not None:
            ctx.error((*path, key), problem)
        out[key] = item
    if kind == "uniform" or (kind == "randint" and "low" in out and "high" in out):
        low = out.get("low", 0)
        high = out.get("high", 1)
        if is_number(low) and is_number(high) and not low < high:
            ctx.error((*path, "high"), f"expected high > low, got low = {show(low)} and high = {show(high)}")
    if kind in schema.SEEDED_GENERATORS and "seed" not in out:
        out["seed"] = ctx.seed
    return out
