"""A target's learned calls merged into one call with symbolic dimensions (issue 56.5).

The store (:mod:`.signatures`) keeps each distinct call of a target, newest first. Calls that
agree on everything but some array sizes (batch 3 in one test, 5 in another) are one program at
several sizes: each such dimension is traced symbolically (JAX shape polymorphism, the recipe's
``symbolic``), named as the author names it:

1. the parameter's jaxtyping annotation name for that axis (``Float[Array, "rows width"]``);
2. else ``batch`` for a leading axis;
3. else ``PARAM_AXIS`` (``x_0``, ``x_2``; JAX's symbolic names cannot hold a dot).

Dimensions whose sizes are the same in every call (a batch in ``x`` and in its ``mask``) share one
symbol. A symbolic trace that fails (a data-dependent shape, a Python ``int()`` of a dimension)
falls back to the newest concrete call, naming the dimension that forced it
(``capture/learnedretry.py``); the store remembers it until the target's file or its calls change.
"""

from __future__ import annotations

import ast
import copy
import keyword
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: the symbolic names a recipe and JAX both take
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: one axis of an array: (where it is, a key path in the table; its axis)
Axis = tuple[tuple[str | int, ...], int]


def merged(tables: list[dict[str, Any]], path: Path, name: str) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """The newest table (``tables[0]``) with the dimensions the calls disagree on made symbolic,
    and each symbol's sizes in the calls (each once, ascending); the newest table as it
    is, and no sizes, when no other call differs from it in array sizes alone."""
    newest = tables[0]
    alike = [t for t in tables if _same_but_sizes(newest, t)]
    if len(alike) < 2 or "symbolic" in newest:
        return newest, {}
    shapes = [dict(_array_shapes(t)) for t in alike]
    groups: dict[tuple[int, ...], list[Axis]] = {}  # sizes over the calls -> the axes with them
    for where, shape in shapes[0].items():
        for axis in range(len(shape)):
            sizes = tuple(int(s[where][axis]) for s in shapes)
            if len(set(sizes)) > 1:
                groups.setdefault(sizes, []).append((where, axis))
    if not groups:
        return newest, {}
    names = _annotation_names(path, name, str(newest.get("kind") or ""), newest.get("method"))
    taken: set[str] = set()
    symbol_of: dict[Axis, str] = {}
    sizes_of: dict[str, list[int]] = {}
    for sizes, axes in groups.items():
        symbol = _symbol(axes, names, taken)
        taken.add(symbol)
        sizes_of[symbol] = sorted(set(sizes))
        for at in axes:
            symbol_of[at] = symbol
    table = copy.deepcopy(newest)
    for where, shape in shapes[0].items():
        spec = _at(table, where)
        spec["shape"] = [symbol_of.get((where, i), d) for i, d in enumerate(shape)]
    table["symbolic"] = list(sizes_of)
    return table, sizes_of


def _same_but_sizes(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same call but for the sizes of their arrays (same ranks)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("kind") == "array" and b.get("kind") == "array":
            rest = {k: v for k, v in a.items() if k != "shape"} == {k: v for k, v in b.items() if k != "shape"}
            return rest and len(a.get("shape") or []) == len(b.get("shape") or [])
        return a.keys() == b.keys() and all(_same_but_sizes(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_but_sizes(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _array_shapes(node: Any, where: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], list[int]]]:
    """Each array spec of a table, by its key path, with its shape (inputs before init: the
    call's own arguments name a shared dimension first)."""
    if isinstance(node, dict):
        if node.get("kind") == "array" and isinstance(node.get("shape"), list):
            yield where, list(node["shape"])
            return
        keys = sorted(node, key=lambda k: (k != "inputs", str(k))) if not where else list(node)
        for key in keys:
            yield from _array_shapes(node[key], (*where, key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _array_shapes(item, (*where, i))


def _at(table: dict[str, Any], where: tuple[str | int, ...]) -> dict[str, Any]:
    node: Any = table
    for key in where:
        node = node[key]
    return node  # type: ignore[no-any-return]


def _symbol(axes: list[Axis], names: dict[str, list[str | None]], taken: set[str]) -> str:
    """The name of the dimension ``axes`` share (the module docstring's rule)."""
    for where, axis in axes:
        param = _parameter(where, names)
        found = names.get(param or "", [])
        given = found[axis] if param is not None and axis < len(found) else None
        if given and given not in taken:
            return given
    if any(axis == 0 and where[:1] == ("inputs",) for where, axis in axes) and "batch" not in taken:
        return "batch"
    where, axis = axes[0]
    nested = "_".join(str(k) for k in where[3:])
    param = _parameter(where, names) or "x"
    symbol = _identifier(f"{param}_{nested}_{axis}" if nested else f"{param}_{axis}")
    while symbol in taken:
        symbol += "_"
    return symbol


def _parameter(where: tuple[str | int, ...], names: dict[str, list[str | None]]) -> str | None:
    """The parameter of the target's call (or constructor) an array at ``where`` is given to."""
    if len(where) < 3 or where[0] not in ("inputs", "init"):
        return None
    if where[1] == "kwargs":
        return str(where[2])
    if where[1] == "args" and isinstance(where[2], int):
        order = names.get(f"<{where[0]}>", [])
        return order[where[2]] if where[2] < len(order) and order[where[2]] else f"arg{where[2]}"
    return None


def _identifier(text: str) -> str:
    out = re.sub(r"\W", "_", text)
    if not out or out[0].isdigit() or keyword.iskeyword(out):
        out = "d_" + out
    return out


def _annotation_names(path: Path, name: str, kind: str, method: Any) -> dict[str, list[str | None]]:
    """Per parameter of the target's call, the axis names of its jaxtyping annotation (None where
    an axis has none); ``<inputs>`` and ``<init>``: the call's and the constructor's positional
    parameter names, in order."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return {}
    parts = name.split(".")
    scope: list[ast.stmt] = tree.body
    found: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None = None
    for part in parts:
        found = None
        for stmt in scope:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and stmt.name == part:
                found = stmt
        if found is None:
            return {}
        scope = found.body
    out: dict[str, list[str | None]] = {}
    if isinstance(found, ast.ClassDef):
        wanted = {"inputs": str(method) if isinstance(method, str) else "__call__", "init": "__init__"}
        for role, method_name in wanted.items():
            fn = next((s for s in found.body if _defines(s, method_name)), None)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                _parameters(fn, role, True, out)
    elif found is not None:
        _parameters(found, "inputs", False, out)
    return out


def _defines(stmt: ast.stmt, name: str) -> bool:
    return isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and stmt.name == name


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef, role: str, method: bool, out: dict[str, Any]) -> None:
    params = [*fn.args.posonlyargs, *fn.args.args]
    if method and params:
        params = params[1:]
    out[f"<{role}>"] = [p.arg for p in params]
    for p in [*params, *fn.args.kwonlyargs]:
        axes = _jaxtyping_axes(p.annotation)
        if axes is not None and p.arg not in out:
            out[p.arg] = axes


def _jaxtyping_axes(annotation: ast.expr | None) -> list[str | None] | None:
    """``Float[Array, "rows width"]`` -> ``["rows", "width"]``; a fixed size is None; a variadic
    part (``*batch``, ``...``) leaves the axes before it named, those after it unknown."""
    if not isinstance(annotation, ast.Subscript):
        return None
    index = annotation.slice
    if not isinstance(index, ast.Tuple) or len(index.elts) != 2:
        return None
    text = index.elts[1]
    if not isinstance(text, ast.Constant) or not isinstance(text.value, str):
        return None
    out: list[str | None] = []
    for token in text.value.split():
        if token.startswith("*") or token == "...":
            break  # the axes after a variadic part are counted from the end: not named here
        word = token.lstrip("#_?").split("=", 1)[0]
        out.append(word if _NAME.match(word) and not word.isdigit() else None)
    return out
