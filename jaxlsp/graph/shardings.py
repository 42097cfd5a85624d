"""Shardings in the graph: a value's ``sharding`` and the graph's ``mesh`` (docs/graph-format.md
"Shardings"), their strict readers, and their short spelling (``f32[8@x,64]``, as jax prints a type).

Stdlib only, Python >= 3.10: the capture worker imports this module inside the user's interpreter.
"""

from __future__ import annotations

from typing import Any

from jaxlsp.graph import strict

# A value's optional axis sets beside its ``spec``, and the letter jax prints each with ({U:x}).
AXIS_SETS = ("varying", "unreduced", "reduced")
_LETTERS = {"varying": "V", "unreduced": "U", "reduced": "R"}


def dims_text(shape: list[int | str], sharding: dict[str, Any] | None) -> str:
    """The dimensions as jax prints them: ``8@x,64``; a dimension split over several axes is
    ``8@(x,y)``; without a sharding the plain ``8,64``."""
    spec = sharding.get("spec") if sharding else None
    if not spec:
        return ",".join(str(d) for d in shape)
    out = []
    for i, d in enumerate(shape):
        axes = spec[i] if i < len(spec) else None
        if not axes:
            out.append(str(d))
        elif len(axes) == 1:
            out.append(f"{d}@{axes[0]}")
        else:
            out.append(f"{d}@({','.join(axes)})")
    return ",".join(out)


def sets_text(sharding: dict[str, Any] | None) -> str:
    """The varying, unreduced and reduced axes as jax prints them after the dimensions
    (``{V:x}``, ``{U:(x,y)}``); ``""`` when there are none."""
    if not sharding:
        return ""
    parts = []
    for key in AXIS_SETS:
        axes = sharding.get(key) or []
        if axes:
            parts.append(f"{_LETTERS[key]}:{axes[0] if len(axes) == 1 else '(' + ','.join(axes) + ')'}")
    return "{" + ", ".join(parts) + "}" if parts else ""


def mesh_text(mesh: dict[str, Any] | None) -> str:
    """``x: 4, y: 2 (Explicit)``: the axes with their sizes, and their types (each axis's when they differ)."""
    if not mesh:
        return ""
    names, sizes, types = mesh["axisNames"], mesh["axisSizes"], mesh["axisTypes"]
    if len(set(types)) <= 1:
        axes = ", ".join(f"{n}: {s}" for n, s in zip(names, sizes, strict=False))
        return f"{axes} ({types[0]})" if types else axes
    return ", ".join(f"{n}: {s} ({t})" for n, s, t in zip(names, sizes, types, strict=False))


def constraint_spec(primitive: str, params: dict[str, Any]) -> str | None:
    """The spec a ``reshard`` moves its operand to, or a ``sharding_constraint``
    (``with_sharding_constraint``) asks for: ``P('x', None)``; None for other equations."""
    key = _CONSTRAINTS.get(primitive)
    target = params.get(key) if key else None
    spec = target.get("spec") if isinstance(target, dict) else None
    return spec if isinstance(spec, str) else None


def map_specs(primitive: str, params: dict[str, Any]) -> str | None:
    """A ``shard_map``'s specs: ``in P('x', None) → out P('x', None)`` (each operand's and
    result's, comma-separated); None for other equations."""
    if primitive != "shard_map":
        return None
    ins, outs = params.get("in_specs"), params.get("out_specs")
    if not isinstance(ins, list) or not isinstance(outs, list):
        return None
    return f"in {', '.join(str(x) for x in ins) or '()'} \u2192 out {', '.join(str(x) for x in outs) or '()'}"


_CONSTRAINTS = {"reshard": "dst_sharding", "sharding_constraint": "sharding"}


# --------------------------------------------------------------------------------------------
# Strict readers (jaxlsp.graph.expanded_rows, expanded_read): a ValueError naming the key path of the
# first problem.


def read_value(data: Any, path: str, rank: int) -> dict[str, Any]:
    """A value's ``sharding``: ``spec`` (one entry per dimension: null, or the mesh axes it is
    split over, major first) and the optional ``varying``, ``unreduced``, ``reduced`` axis names."""
    d = strict.obj(data, path, ("spec",), AXIS_SETS)
    where = strict.join(path, "spec")
    entries = strict.array(d["spec"], where)
    if len(entries) != rank:
        raise strict.fail(where, f"expected {rank} entries (one per dimension of the shape), got {len(entries)}")
    spec: list[list[str] | None] = []
    for i, entry in enumerate(entries):
        if entry is None:
            spec.append(None)
            continue
        axes = strict.strings(entry, f"{where}[{i}]")
        if not axes or not all(axes):
            raise strict.fail(f"{where}[{i}]", "expected null or a non-empty array of mesh axis names")
        spec.append(axes)
    out: dict[str, Any] = {"spec": spec}
    for key in AXIS_SETS:
        if key in d:
            out[key] = strict.strings(d[key], strict.join(path, key))
    return out


def read_mesh(data: Any, path: str) -> dict[str, Any]:
    """The graph's ``mesh``: ``axisNames``, ``axisSizes`` (integers >= 1), ``axisTypes``
    (``Explicit``, ``Auto``, ``Manual``), one entry each per axis."""
    d = strict.obj(data, path, ("axisNames", "axisSizes", "axisTypes"))
    names = strict.strings(d["axisNames"], strict.join(path, "axisNames"))
    sizes_path = strict.join(path, "axisSizes")
    sizes = [strict.integer(n, f"{sizes_path}[{i}]", 1) for i, n in enumerate(strict.array(d["axisSizes"], sizes_path))]
    types = strict.strings(d["axisTypes"], strict.join(path, "axisTypes"))
    for key, items in (("axisSizes", sizes), ("axisTypes", types)):
        if len(items) != len(names):
            raise strict.fail(
                strict.join(path, key), f"expected {len(names)} entries (one per axis name), got {len(items)}"
            )
    return {"axisNames": names, "axisSizes": sizes, "axisTypes": types}
