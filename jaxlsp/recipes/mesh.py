"""``mesh``: the device mesh a profile's inputs are sharded over (explicit sharding, issue 28).

``mesh = { axes = { data = 2, model = 2 } }`` names the axes and their sizes, in order; their
types are ``Explicit`` (the sharding is part of every array's type, ``f32[8@data,64]``) unless
``types`` says ``"auto"`` for all of them or ``{ model = "auto" }`` for some. An array spec's
``sharding`` (checked in :mod:`jaxlsp.recipes.specs`) names these axes. On the CPU the mesh's size
is the number of virtual devices unless ``devices`` gives one, which must be at least that size.
"""

from __future__ import annotations

import math
from typing import cast

from jaxlsp.recipes import schema
from jaxlsp.recipes.problems import KeyPath
from jaxlsp.recipes.schema import show
from jaxlsp.recipes.specs import Context, is_int
from jaxlsp.worker.protocol import AxisType, MeshSpec

EXAMPLE = "mesh = { axes = { data = 2, model = 2 } }"
_TYPES = {"explicit": "Explicit", "auto": "Auto"}


def check_mesh(ctx: Context, path: KeyPath, value: object) -> MeshSpec | None:
    """The mesh table in the worker protocol's shape; its axes go into ``ctx`` for the shardings."""
    if value is None:
        return None
    if not isinstance(value, dict):
        ctx.error(path, f"expected a table such as {EXAMPLE}, got {show(value)}")
        ctx.mesh_path = path
        return None
    ctx.mesh_path = path  # from here on a sharding's axes are this mesh's (or not checked, when it is wrong)
    ctx.unknown_keys(path, value, schema.MESH_KEYS)
    axes = value.get("axes")
    if axes is None:
        ctx.error((*path, "axes"), f"missing (the axis names and sizes, in order: {EXAMPLE})")
        return None
    if not isinstance(axes, dict) or not axes:
        ctx.error((*path, "axes"), f"expected a table of axis sizes (name = positive integer), got {show(axes)}")
        return None
    sizes: dict[str, int] = {}
    for name, size in axes.items():
        where = (*path, "axes", name)
        if not schema.IDENTIFIER.fullmatch(name):
            ctx.error(where, "expected an axis name (letters, digits, _)")
        elif not is_int(size) or not 1 <= size <= schema.MAX_DEVICES:
            ctx.error(where, f"expected an axis size from 1 to {schema.MAX_DEVICES}, got {show(size)}")
        else:
            sizes[name] = size
    types = _types(ctx, (*path, "types"), value.get("types", "explicit"), list(axes))
    ctx.mesh = dict(sizes) if len(sizes) == len(axes) else None  # shardings are checked against a good mesh
    if ctx.mesh is None or types is None:
        return None
    return {"axisNames": list(sizes), "axisSizes": list(sizes.values()), "axisTypes": types}


def _types(ctx: Context, path: KeyPath, value: object, names: list[str]) -> list[AxisType] | None:
    choices = tuple(_TYPES)
    if isinstance(value, str):
        if value not in _TYPES:
            ctx.error(path, f"expected one of {schema.one_of(choices)} (or a table axis = type), got {show(value)}")
            return None
        return [cast(AxisType, _TYPES[value])] * len(names)
    if not isinstance(value, dict):
        ctx.error(path, f'expected "explicit", "auto" or a table such as {{ model = "auto" }}, got {show(value)}')
        return None
    ok = True
    for name, kind in value.items():
        if name not in names:
            ctx.error((*path, name), f"not an axis of the mesh (axes: {', '.join(names)})")
            ok = False
        elif kind not in _TYPES:
            ctx.error((*path, name), f"expected one of {schema.one_of(choices)}, got {show(kind)}")
            ok = False
    if not ok:
        return None
    return [cast(AxisType, _TYPES[str(value.get(name, "explicit"))]) for name in names]


def size_of(mesh: MeshSpec) -> int:
    return math.prod(mesh["axisSizes"])


def spelled(mesh: MeshSpec) -> str:
    """``data: 2, model: 2``: the axes and sizes, as a message names them."""
    return ", ".join(f"{n}: {s}" for n, s in zip(mesh["axisNames"], mesh["axisSizes"], strict=True))


def check_devices(ctx: Context, path: KeyPath, mesh: MeshSpec, devices: int | None, device: object) -> int | None:
    """The devices the capture makes: the mesh's size on the CPU when ``devices`` is not given;
    a ``devices`` smaller than the mesh is an error at the mesh's axes."""
    size = size_of(mesh)
    if device not in (None, "cpu"):
        return devices  # an accelerator's devices are counted in the worker
    if devices is None:
        return size if size > 1 else None
    if devices < size:
        ctx.error(
            (*path, "axes"),
            f"a mesh of {size} devices ({spelled(mesh)}) needs at least {size} devices, and devices = {devices}; "
            f"set devices = {size} or more, or drop devices (the mesh's size is the default)",
        )
    return devices


def too_few(mesh: MeshSpec, where: str, have: int, what: str) -> str:
    """The message of a mesh larger than the devices the capture has (the engine's, the worker's)."""
    size = size_of(mesh)
    return f"{where}: a mesh of {size} devices ({spelled(mesh)}) needs at least {size} devices, and {what} is {have}"
