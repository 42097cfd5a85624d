"""An equation's params, literals and shardings as the graph spells them in JSON: small arrays
inline, dtypes, meshes and named shardings, callables and rules by name.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, SupportsIndex, TypeGuard, cast

from jaxlsp.worker.protocol import Json

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr, Jaxpr

INLINE_LIMIT = 16  # elements of a literal or constant shown inline

RULE_PARAMS = frozenset(
    {"jvp", "jvp_jaxpr_fun", "jvp_jaxpr_thunk", "fwd_jaxpr_thunk", "bwd", "out_trees", "fwd", "transpose"}
)


def is_jaxpr(obj: object) -> TypeGuard[Jaxpr | ClosedJaxpr]:
    return type(obj).__name__ in ("Jaxpr", "ClosedJaxpr") and hasattr(
        obj, "eqns" if type(obj).__name__ == "Jaxpr" else "jaxpr"
    )


def dim(d: object) -> int | str:
    try:
        return operator.index(cast("SupportsIndex", d))  # a TypeError where it is none
    except TypeError:
        return str(d)


def small_array(value: object) -> Json:
    """A JSON-safe inline form of a small constant; None when large or not numeric."""
    try:
        import numpy as np

        dtype = getattr(value, "dtype", None)
        if dtype is not None and "key" in str(dtype):
            return None
        arr = np.asarray(value)
        if arr.size > INLINE_LIMIT or arr.dtype.kind not in "biufc":
            return None
        return _finite(arr.tolist())
    except Exception:
        return None


def _finite(x: object) -> Json:
    if isinstance(x, complex):
        return [_finite(x.real), _finite(x.imag)]
    if isinstance(x, list):
        return [_finite(i) for i in x]
    return cast("Json", x)  # an item of ``tolist()``: a bool, int or float


_PLAIN = frozenset({type(None), bool, int, float, str})
# The types of dtypes met (numpy's one class per dtype): the branch they take below depends on the
# type alone, so it is taken at once the next time. Their text is cached: numpy's ``str`` of a
# dtype is Python code, 11 us each, for a param most equations have.
_DTYPE_KINDS: set[type] = set()
_DTYPE_TEXTS: dict[tuple[type, object], str] = {}


def _dtype_text(value: object) -> str:
    try:
        key = (type(value), value)
        text = _DTYPE_TEXTS.get(key)
    except TypeError:  # unhashable
        return str(value)
    if text is None:
        text = _DTYPE_TEXTS[key] = str(value)
    return text


def jsonable(value: object, refs: dict[int, Json], where: str, depth: int = 0) -> Json:
    """A JSON-safe form of an equation param. What has no JSON form is written as readable text
    (``P('x', None)``, ``cpu:0``, ``b``, a function's name): a parameter is data about the
    equation, never a region of the program, so it never makes the graph incomplete."""
    # Exact types first, which most params are (axes, shapes, flags, None): a fifth of the walk
    # went to the checks below before they reached these. A subclass (an IntEnum, a named tuple)
    # takes the general path. ``refs`` holds the ids of live sub-jaxprs, never a number's or a
    # text's.
    kind = type(value)
    if kind in _PLAIN:
        return cast("Json", value)  # None, a bool, int, float or str
    if (kind is tuple or kind is list) and depth <= 6 and id(value) not in refs:
        return [jsonable(v, refs, where, depth + 1) for v in cast("Iterable[object]", value)]
    if kind in _DTYPE_KINDS and depth <= 6:
        return _dtype_text(value)
    if id(value) in refs:
        return refs[id(value)]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value
    if depth > 6:
        return _text(value)
    tname = type(value).__name__
    if is_jaxpr(value):
        return {"jaxpr": str(len(getattr(value, "eqns", getattr(getattr(value, "jaxpr", None), "eqns", ()))))}
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if tname == "PRNGImpl" and hasattr(value, "key_shape"):
        # the PRNG implementation of random_seed / random_wrap (threefry, rbg): its fields are jax's own
        # functions, not opaque user code
        return {"type": tname, "name": str(getattr(value, "name", "")), "tag": str(getattr(value, "tag", ""))}
    if tname in ("Mesh", "AbstractMesh") and hasattr(value, "axis_names"):
        return _mesh(value)
    if tname in ("PartitionSpec", "P") or (module_of(value).startswith("jax") and tname.endswith("Spec")):
        return repr(value)  # P('x', None)
    if hasattr(value, "platform") and hasattr(value, "id") and "Device" in tname:
        return f"{value.platform}:{value.id}"  # cpu:0
    if tname == "_DimExpr" or (module_of(value).startswith("jax") and "shape_poly" in module_of(value)):
        return str(value)  # a symbolic dimension: b, 2*b
    if isinstance(value, tuple | list):
        fields = getattr(value, "_fields", None)
        if fields:
            return {str(f): jsonable(v, refs, f"{where}.{f}", depth + 1) for f, v in zip(fields, value, strict=False)}
        return [jsonable(v, refs, where, depth + 1) for v in value]
    if isinstance(value, frozenset | set):
        return sorted(str(v) for v in value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, refs, f"{where}.{k}", depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name, None), refs, f"{where}.{f.name}", depth + 1)
            for f in dataclasses.fields(value)
        }
    module = module_of(value)
    if tname.endswith("DType") or tname == "dtype" or (module.startswith("numpy") and hasattr(value, "kind")):
        _DTYPE_KINDS.add(kind)
        return _dtype_text(value)
    if isinstance(value, type):
        return getattr(value, "__name__", str(value))
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        inline = small_array(value)
        if inline is not None:
            return inline
        return {"shape": [dim(d) for d in value.shape], "dtype": str(value.dtype)}
    if tname == "PyTreeDef" and len(text := str(value)) <= 2000:  # a structure its text spells out whole
        return {"treedef": text}
    if tname == "NamedSharding" and hasattr(value, "spec") and hasattr(value, "mesh"):
        return _named_sharding(value)
    if tname in ("UnspecifiedValue", "AUTO") or tname.endswith(("Sharding", "Layout", "Format")):
        return {"type": tname, "repr": repr(value)[:200]}
    if where.split(".")[0] in RULE_PARAMS or callable(value):
        return {"callable": _callable_name(value)}
    if hasattr(value, "item") and not hasattr(value, "shape"):
        try:
            return _finite(value.item())
        except Exception:
            pass
    return _text(value)


def module_of(value: object) -> str:
    return str(getattr(type(value), "__module__", "") or "")


def _text(value: object) -> str:
    """Readable text of a value without a JSON form: its ``str`` (``b``, ``cpu:0``), cut to 200
    characters, without a memory address (which would make equal graphs differ)."""
    try:
        text = str(value)
    except Exception:
        text = type(value).__name__
    text = _ADDRESS.sub("", text)
    return text[:200]


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _callable_name(value: object) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if not isinstance(name, str):
        inner = getattr(value, "func", None) or getattr(value, "__wrapped__", None)
        name = getattr(inner, "__qualname__", None) or type(value).__name__
    return str(name)


def _mesh(mesh: object) -> dict[str, Json]:
    """A mesh with its axis names and sizes (``{"axis_names": ["i"], "axis_sizes": [2]}``)."""
    names = [str(n) for n in getattr(mesh, "axis_names", ())]
    sizes = getattr(mesh, "axis_sizes", None)
    if sizes is None:
        shape = getattr(mesh, "shape", {}) or {}
        sizes = [shape.get(n) for n in getattr(mesh, "axis_names", ())]
    out: dict[str, Json] = {"type": type(mesh).__name__, "axis_names": names, "axis_sizes": [int(x) for x in sizes]}
    types = getattr(mesh, "axis_types", None)
    if types is not None:
        out["axis_types"] = [getattr(t, "name", str(t)) for t in types]
    return out


class _Specified(Protocol):
    spec: object


def _named_sharding(value: _Specified) -> dict[str, Json]:
    """A ``NamedSharding`` param (``with_sharding_constraint``, ``reshard``) readably: its spec as
    written (``P('x', None)``) and its mesh's axes, not a repr cut in the middle of the mesh."""
    out: dict[str, Json] = {"type": "NamedSharding", "spec": repr(value.spec)}
    mesh = getattr(value, "mesh", None)
    if mesh is not None and hasattr(mesh, "axis_names"):
        out["mesh"] = _mesh(mesh)
    memory_kind = getattr(value, "memory_kind", None)
    if memory_kind is not None:
        out["memory_kind"] = str(memory_kind)
    return out


def mesh_axes(mesh: object) -> list[tuple[str, int]]:
    """``[(axis name, size)]`` of a mesh param ([] when it is not one)."""
    if mesh is None or not hasattr(mesh, "axis_names"):
        return []
    data = _mesh(mesh)
    names, sizes = cast("list[str]", data["axis_names"]), cast("list[int]", data["axis_sizes"])  # _mesh's
    return list(zip(names, sizes, strict=False))


def value_sharding(aval: object, rank: int) -> tuple[dict[str, Json] | None, dict[str, Json] | None]:
    """A value's sharding as the graph keeps it (``{"spec": [["x"], None], "unreduced": [...]}``,
    None when it is split over no axis and has no unreduced, reduced or varying ones) and its
    mesh (``{"axisNames", "axisSizes", "axisTypes"}``, None without one: a single device).

    With explicit sharding jax's abstract value carries a ``NamedSharding`` on an abstract mesh;
    inside a ``shard_map`` body its manual axes (``aval.mat``) say which axes the value varies
    over. Versions of jax without them give (None, None)."""
    jax_sharding = getattr(aval, "sharding", None)
    mesh_obj = getattr(jax_sharding, "mesh", None)
    names = tuple(getattr(mesh_obj, "axis_names", ()) or ())
    if not names:
        return None, None
    try:
        sizes = [int(n) for n in getattr(mesh_obj, "axis_sizes", ())]
        types = [getattr(t, "name", str(t)) for t in (getattr(mesh_obj, "axis_types", None) or ())]
    except (TypeError, ValueError):
        return None, None
    axis_names = [str(n) for n in names]
    mesh: dict[str, Json] = {"axisNames": axis_names, "axisSizes": sizes, "axisTypes": types}
    if len(sizes) != len(names) or len(types) != len(names):
        return None, None
    spec = getattr(jax_sharding, "spec", None)
    partitions = getattr(spec, "partitions", None)
    if partitions is None:
        partitions = tuple(spec) if isinstance(spec, tuple) else ()
    entries: list[list[str] | None] = []
    for part in list(partitions)[:rank]:
        if isinstance(part, str):
            entries.append([part])
        elif isinstance(part, tuple) and part and all(isinstance(a, str) for a in part):
            entries.append(list(part))
        else:  # None, (), or P.UNCONSTRAINED: not split over a mesh axis
            entries.append(None)
    entries += [None] * (rank - len(entries))
    mat = getattr(aval, "mat", None)
    order = {n: i for i, n in enumerate(axis_names)}
    sets: dict[str, list[str]] = {}
    for key in ("varying", "unreduced", "reduced"):
        axes = set(getattr(mat, key, None) or ()) | (set(getattr(spec, key, None) or ()) if key != "varying" else set())
        if axes:
            sets[key] = sorted((str(a) for a in axes), key=lambda a: (order.get(a, len(order)), a))
    if not sets and all(e is None for e in entries):
        return None, mesh
    return {"spec": entries, **sets}, mesh
