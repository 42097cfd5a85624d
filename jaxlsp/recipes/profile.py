"""One ``[profiles.NAME]`` table checked and resolved: every key validated, dimensions filled,
limits and 64-bit dtypes checked, the result in the worker protocol's shapes.

:func:`check_profile` never raises: it returns the problems (key path, message) it found, the
items that must be asked for, and the resolved profile when there are neither.
:func:`resolve_table` turns that into a :class:`Resolved` or :class:`NeedsInput` (or raises): the one
step a file's profile (``recipe``), a proposal and an answered one (``propose``) share.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from jaxlsp.recipes import examples, schema
from jaxlsp.recipes.locate import problem_at
from jaxlsp.recipes.mesh import check_devices, check_mesh
from jaxlsp.recipes.problems import KeyPath, RecipeError, format_key_path
from jaxlsp.recipes.schema import show
from jaxlsp.recipes.selection import NeedsInput, Resolved, Selected
from jaxlsp.recipes.specs import Context, check_args, check_kwargs, check_ref_name, check_seed, is_int
from jaxlsp.recipes.topology import check_pod, check_topology
from jaxlsp.worker.protocol import (
    DEVICE_CHOICES,
    CallSpec,
    ExampleSpec,
    ResolvedProfile,
    Target,
    TargetKind,
)


@dataclass(slots=True)
class Checked:
    """What :func:`check_profile` found."""

    problems: list[tuple[KeyPath, str]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    profile: ResolvedProfile | None = None  # set when there are no problems and nothing missing
    target: Target | None = None
    python: str | None = None


def split_target(value: str) -> tuple[str, str] | None:
    """``path/to/file.py::Name`` -> (path, Name), or None when malformed."""
    path, sep, name = value.rpartition("::")
    if not sep or not path.strip() or not schema.DOTTED.fullmatch(name):
        return None
    return path, name


def names_method(name: str) -> bool:
    """Whether a dotted target names a method (``MLP.encode``) rather than a class (``Outer.Inner``):
    its last part starts with a lower-case letter or an underscore."""
    head, _, last = name.rpartition(".")
    return bool(head) and not last[:1].isupper()


def target_path(base: Path, rel: str) -> Path:
    """The absolute path of a target written relative to ``base`` (the recipe's folder)."""
    return Path(os.path.normpath(base / Path(rel).expanduser()))


def resolve_table(
    name: str,
    table: Mapping[str, Any],
    base: Path,
    *,
    recipe: Path | None = None,
    lines: dict[KeyPath, int] | None = None,
) -> Selected:
    """Check and resolve one profile table (a proposal, an answered one, one from a file).

    ``profile["name"]`` is ``name`` when ``recipe`` is given, else None (not saved anywhere).
    Raises :class:`RecipeError`; positions come from ``lines`` when given.
    """
    copied: dict[str, Any] = copy.deepcopy(dict(table))
    checked = check_profile(name, copied, base)
    if checked.problems:
        found = lines or {}
        raise RecipeError([problem_at(recipe, found, k, m) for k, m in checked.problems])
    if checked.missing:
        return NeedsInput(name, checked.missing, copied, base, recipe)
    assert checked.profile is not None and checked.target is not None
    profile = checked.profile
    if recipe is None:
        profile["name"] = None
    return Resolved(name, profile, checked.target, checked.python, copied, recipe)


def check_profile(name: str, table: object, base: Path, prefix: KeyPath | None = None) -> Checked:
    """Check and resolve one profile table; ``base`` is the folder its target is relative to."""
    path: KeyPath = prefix if prefix is not None else ("profiles", name)
    out = Checked()
    ctx = Context()
    if not isinstance(table, dict):
        out.problems.append((path, f"expected a table [{format_key_path(path)}], got {show(table)}"))
        return out
    ctx.unknown_keys(path, table, schema.PROFILE_KEYS)

    seed = table.get("seed", 0)
    ctx.seed = check_seed(ctx, (*path, "seed"), seed) or 0
    x64 = table.get("x64", False)
    if not isinstance(x64, bool):
        ctx.error((*path, "x64"), f"expected true or false, got {show(x64)}")
        x64 = False
    symbolic = _names(ctx, (*path, "symbolic"), table.get("symbolic", []), "dimension names")
    ctx.symbolic = frozenset(symbolic)
    ctx.dims = _dims(ctx, (*path, "dims"), table.get("dims", {}), ctx.symbolic)

    target, kind = _target(ctx, path, table, base)
    device = _choice(ctx, (*path, "device"), table.get("device", "cpu"), None)
    python = _python(ctx, (*path, "python"), table.get("python"), base)
    transform = _choice(ctx, (*path, "transform"), table.get("transform"), schema.TRANSFORMS)
    load = _load(ctx, (*path, "load"), table.get("load"), target)
    method = table.get("method")
    if method is not None:
        if not isinstance(method, str) or not schema.IDENTIFIER.fullmatch(method):
            ctx.error((*path, "method"), f"expected a method name, got {show(method)}")
        elif target is not None and names_method(target["name"]):
            ctx.error(
                (*path, "method"),
                f"the target already names a method ({target['name']}); drop method or name the class",
            )
        elif kind == "function":
            ctx.error((*path, "method"), 'method is for module targets, and kind = "function"')
    env = _names(ctx, (*path, "env"), table.get("env", []), "environment variable names")
    rngs = _names(ctx, (*path, "rngs"), table.get("rngs", []), "rng stream names")
    given_mutable = table.get("mutable", [])
    mutable: list[str] | bool = (
        True if given_mutable is True else _names(ctx, (*path, "mutable"), given_mutable, "collection names")
    )
    for key, given in (("rngs", rngs), ("mutable", mutable)):
        if given and kind is not None and kind != "linen":
            ctx.error((*path, key), f'{key} is for Linen modules, and kind = "{kind}"')

    devices = _devices(ctx, (*path, "devices"), table.get("devices"), device)
    mesh = check_mesh(ctx, (*path, "mesh"), table.get("mesh"))  # before the inputs, whose shardings name it
    if "mesh" in table and "from" in table:
        ctx.error((*path, "mesh"), "from learns the inputs, and their shardings, from a run; drop mesh or from")
    topology = check_topology(ctx, (*path, "topology"), table.get("topology"))
    if topology is not None:  # a pod's devices, not virtual CPU ones (recipes/topology.py)
        check_pod(ctx, path, topology, mesh, "mesh" in table, table.get("device"), table.get("devices"))
    elif mesh is not None and (devices is not None or "devices" not in table):
        devices = check_devices(ctx, (*path, "mesh"), mesh, devices, device)
    example = _example(ctx, path, table, base)
    init: CallSpec | None = None
    if "init" in table:
        init = _call(ctx, (*path, "init"), table["init"])
        if kind == "function" and "factory" not in init:
            ctx.error(
                (*path, "init"),
                'init arguments are for module targets, and kind = "function"; a function target takes '
                'init = { factory = "module:function" }, a function returning the callable to trace',
            )
    inputs = _call(ctx, (*path, "inputs"), table.get("inputs", {}))

    _limits(ctx, path, x64, topology is None)
    out.problems = ctx.problems
    out.missing = _missing(ctx, path)
    if out.problems or out.missing or target is None:
        return out
    profile: dict[str, Any] = {
        "name": name,
        "device": device,
        "seed": ctx.seed,
        "x64": x64,
    }
    if init is not None:
        profile["init"] = init
    profile["inputs"] = inputs
    if transform is not None:
        profile["transform"] = transform
    if rngs:
        profile["rngs"] = rngs
    if mutable:
        profile["mutable"] = mutable
    if method is not None:
        profile["method"] = method
    profile["load"] = load
    if symbolic:
        profile["symbolic"] = symbolic
    if devices is not None:
        profile["devices"] = devices
    if mesh is not None:
        profile["mesh"] = mesh
    if topology is not None:
        profile["topology"] = topology
    if env:
        profile["env"] = env
    if example is not None:
        profile["example"] = example
    out.profile = cast(ResolvedProfile, profile)
    out.target = target
    out.python = python
    return out


def _target(ctx: Context, path: KeyPath, table: dict[str, Any], base: Path) -> tuple[Target | None, str | None]:
    kind = table.get("kind")
    if kind is not None and kind not in schema.KINDS:
        ctx.error((*path, "kind"), f"expected one of {schema.one_of(schema.KINDS)}, got {show(kind)}")
        kind = None
    if "target" not in table:
        ctx.error((*path, "target"), 'missing (expected "path/to/file.py::Name", relative to the recipe\'s folder)')
        return None, kind
    value = table["target"]
    parts = split_target(value) if isinstance(value, str) else None
    if parts is None:
        ctx.error(
            (*path, "target"),
            f'expected "path/to/file.py::Name" (Name may be Class.method), got {show(value)}',
        )
        return None, kind
    target: Target = {"path": str(target_path(base, parts[0])), "name": parts[1]}
    if kind is not None:
        target["kind"] = cast(TargetKind, kind)
    return target, kind


def _load(ctx: Context, path: KeyPath, value: object, target: Target | None) -> str | None:
    """``load``: ``module`` by default, ``definitions`` for a notebook, whose ``cells`` is its own."""
    notebook = target is not None and target["path"].endswith(".ipynb")
    if value is None:
        return "definitions" if notebook else "module"
    load = _choice(ctx, path, value, schema.LOADS)
    if load == "cells" and target is not None and not notebook:
        ctx.error(path, 'load = "cells" is for notebook targets (.ipynb): use "module" or "definitions" here')
    elif load == "module" and notebook:
        ctx.error(
            path,
            'a notebook is not imported as a module: use "definitions" (the default: imports and definitions'
            ' only) or "cells" (runs the cells above the target first)',
        )
    return cast(str | None, load)


def _example(ctx: Context, path: KeyPath, table: dict[str, Any], base: Path) -> ExampleSpec | None:
    """``from``: an example to run instead of inputs (recipes/examples.py)."""
    value = table.get("from")
    if value is None:
        return None
    if not isinstance(value, str):
        ctx.error((*path, "from"), f"expected {examples.FORM}, got {show(value)}")
        return None
    for key in ("init", "inputs"):
        if key in table:
            ctx.error((*path, key), f"from learns the inputs from a run of {value}; drop {key} or from")
    try:
        return examples.parse_example(value, base, check=False)
    except examples.ExampleError as exc:
        ctx.error((*path, "from"), str(exc))
        return None


def _choice(ctx: Context, path: KeyPath, value: object, allowed: tuple[str, ...] | None) -> Any:
    if value is None:
        return None
    if allowed is None:  # the device
        if isinstance(value, str) and schema.DEVICE.fullmatch(value):
            return value
        ctx.error(path, f"expected {DEVICE_CHOICES} (N a device number), got {show(value)}")
        return None
    if value not in allowed:
        ctx.error(path, f"expected one of {schema.one_of(allowed)}, got {show(value)}")
        return None
    return value


def _devices(ctx: Context, path: KeyPath, value: object, device: object) -> int | None:
    """``devices = N``: N virtual CPU devices for the capture (pmap, shard_map, meshes)."""
    if value is None:
        return None
    if not is_int(value) or not 1 <= value <= schema.MAX_DEVICES:  # type: ignore[operator]
        ctx.error(path, f"expected a number of devices from 1 to {schema.MAX_DEVICES}, got {show(value)}")
        return None
    if isinstance(device, str) and device != "cpu":
        ctx.error(
            path,
            f'devices = {value} makes virtual CPU devices, and device = "{device}"; '
            'use device = "cpu" (the default) or drop devices',
        )
        return None
    assert isinstance(value, int)
    return value


def _python(ctx: Context, path: KeyPath, value: object, base: Path) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        ctx.error(path, f"expected the path of a Python interpreter, got {show(value)}")
        return None
    if "/" in value or value.startswith("~") or value.startswith("."):
        return os.path.normpath(base / Path(value).expanduser())
    return value  # a command name, looked up on PATH by whoever starts it


def _names(ctx: Context, path: KeyPath, value: object, what: str) -> list[str]:
    if not isinstance(value, list):
        ctx.error(path, f"expected a list of {what}, got {show(value)}")
        return []
    names: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not schema.IDENTIFIER.fullmatch(item):
            ctx.error((*path, i), f"expected a name (letters, digits, _), got {show(item)}")
        elif item in names:
            ctx.error((*path, i), f"{show(item)} is listed twice")
        else:
            names.append(item)
    return names


def _dims(ctx: Context, path: KeyPath, value: object, symbolic: frozenset[str]) -> dict[str, int]:
    if not isinstance(value, dict):
        ctx.error(path, f"expected a table of dimension sizes (name = positive integer), got {show(value)}")
        return {}
    dims: dict[str, int] = {}
    for name, size in value.items():
        where = (*path, name)
        if not schema.IDENTIFIER.fullmatch(name):
            ctx.error(where, "expected a dimension name (letters, digits, _)")
        elif name in symbolic:
            ctx.error(where, f"{name} is listed in symbolic, so it has no size; drop one of them")
        elif not is_int(size) or size <= 0:
            ctx.error(where, f"expected a positive integer, got {show(size)}")
        else:
            dims[name] = size
    return dims


def _call(ctx: Context, path: KeyPath, value: object) -> CallSpec:
    if not isinstance(value, dict):
        ctx.error(path, f"expected a table with args and kwargs, or factory, got {show(value)}")
        return {}
    ctx.unknown_keys(path, value, schema.CALL_KEYS)
    if "factory" in value:
        for key in ("args", "kwargs"):
            if key in value:
                ctx.error((*path, key), "a factory is called with no arguments; drop args/kwargs or the factory")
        factory = check_ref_name(ctx, (*path, "factory"), value["factory"], "function")
        return {"factory": factory or ""}
    return {
        "args": check_args(ctx, (*path, "args"), value.get("args", [])),
        "kwargs": check_kwargs(ctx, (*path, "kwargs"), value.get("kwargs", {})),
    }


def _limits(ctx: Context, path: KeyPath, x64: bool, built: bool = True) -> None:
    """256 arrays and 4,194,304 elements in all; 64-bit dtypes only with ``x64 = true``. The
    element limit is for arrays a capture builds: a topology profile's (``built`` False) stay
    abstract, bounded by the compile (a chip's HBM, the worker's memory cap and deadline)."""
    if len(ctx.arrays) > schema.MAX_ARRAYS:
        first_over = ctx.arrays[schema.MAX_ARRAYS][0]
        ctx.error(
            first_over,
            f"{len(ctx.arrays)} arrays in this profile, over the limit of {schema.MAX_ARRAYS} "
            "(checked before anything runs)",
        )
    total = sum(elements for _, elements, _ in ctx.arrays)
    if total > schema.MAX_ELEMENTS and built:
        where, largest, shape = max(ctx.arrays, key=lambda item: item[1])
        unknown = " (at least: unknown dimensions counted as 1)" if ctx.missing_dims else ""
        ctx.error(
            where,
            f"{total:,} array elements in this profile{unknown}, over the limit of {schema.MAX_ELEMENTS:,} "
            f"(checked before anything runs); the largest array is this one, "
            f"shape {show(shape)} = {largest:,} elements",
        )
    if not x64:
        for where, dtype in ctx.wide:
            ctx.error(
                where,
                f"{dtype} needs x64 = true in this profile (64-bit values are refused, never narrowed)",
            )


def _missing(ctx: Context, path: KeyPath) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for name, used in ctx.missing_dims.items():
        at = [format_key_path(p) for p in used]
        items.append(
            {
                "path": format_key_path((*path, "dims", name)),
                "kind": "dimension",
                "name": name,
                "usedAt": at,
                "message": f"the size of dimension {name} (a positive integer), used at {', '.join(at)}",
            }
        )
    for where in ctx.missing_shapes:
        items.append(
            {
                "path": format_key_path(where),
                "kind": "shape",
                "message": "the shape of this array (a list of positive integers and dimension names)",
            }
        )
    return items
