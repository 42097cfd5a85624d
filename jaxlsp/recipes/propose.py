"""Profiles proposed from what discovery knows, and answers to needs-input filled in.

:func:`propose` turns an entrypoint's setup fields (function parameters, NNX/Equinox
``__init__`` parameters, Linen fields) into a profile table, guessing only what annotations say:
a dimension name or an unannotated parameter is asked for, never guessed. The result resolves
like any profile: :class:`Resolved` when everything is known, else :class:`NeedsInput`, which
:func:`apply_answers` completes.
"""

from __future__ import annotations

import ast
import copy
import itertools
import math
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxlsp.recipes import schema
from jaxlsp.recipes.annotations import ArrayGuess, KeyGuess, RngsGuess, StaticGuess, guess
from jaxlsp.recipes.problems import KeyPath, Problem, RecipeError, format_key_path, parse_key_path
from jaxlsp.recipes.profile import resolve_table
from jaxlsp.recipes.selection import NeedsInput, Selected

if TYPE_CHECKING:
    from jaxlsp.discovery.callsites.sites import CallSite
    from jaxlsp.discovery.entrypoints import Entrypoint
    from jaxlsp.discovery.summary import SetupField

_FILLED_BY_WORKER = {"nnx": "rngs", "equinox": "key"}  # constructor parameters the worker fills
_STATIC_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}


def _literal(default: str) -> int | float | bool | str | None:
    """A default's value when it is a Python int, float, bool or str literal."""
    try:
        value = ast.literal_eval(default)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, (int, float, bool, str)) else None


def new_profile_name(name: str, taken: Collection[str]) -> str:
    base = name.replace(".", "_")
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def target_text(path: Path, name: str, base: Path) -> str:
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(base))
    return f"{Path(rel).as_posix()}::{name}"


class _Builder:
    """Fills one call table (``init`` or ``inputs``) from setup fields."""

    def __init__(self, prefix: KeyPath) -> None:
        self.prefix = prefix
        self.pending: list[dict[str, Any]] = []
        self.wide = False

    def call(self, section: str, fields: Iterable[SetupField], skip: str | None) -> dict[str, Any]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for f in fields:
            if f.kind in ("var_positional", "var_keyword") or f.name == skip:
                continue
            positional = f.kind in ("positional", "positional_only")
            if f.default is not None:
                value = _literal(f.default)
                if value is not None and f.kind != "positional_only":
                    kwargs[f.name] = value  # shown so it can be edited; the same as the default
                continue
            where: KeyPath = (
                (*self.prefix, section, "args", len(args)) if positional else (*self.prefix, section, "kwargs", f.name)
            )
            spec = self.spec(where, f)
            if positional:
                args.append(spec)
            else:
                kwargs[f.name] = spec
        out: dict[str, Any] = {}
        if args:
            out["args"] = args
        if kwargs:
            out["kwargs"] = kwargs
        return out

    def spec(self, where: KeyPath, f: SetupField) -> Any:
        g = guess(f.name, f.annotation)
        shown = f"{f.name} ({f.annotation})" if f.annotation else f.name
        if isinstance(g, KeyGuess):
            return {"kind": "key"}
        if isinstance(g, RngsGuess):
            return {"ref": "flax.nnx:Rngs", "args": [0]}
        if isinstance(g, ArrayGuess):
            self.wide = self.wide or g.dtype in schema.WIDE_DTYPES
            spec: dict[str, Any] = {"kind": "array"}
            if g.shape is not None:
                spec["shape"] = g.shape
            else:
                self.pending.append(
                    {
                        "path": format_key_path((*where, "shape")),
                        "kind": "shape",
                        "param": f.name,
                        "annotation": f.annotation,
                        "message": f"the shape of {f.name} ({g.why_unknown}): a list of positive integers "
                        "and dimension names",
                    }
                )
            if g.dtype != "float32":
                spec["dtype"] = g.dtype
            return spec
        expected = _STATIC_WORDS[g.type] if isinstance(g, StaticGuess) else "an input spec"
        self.pending.append(
            {
                "path": format_key_path(where),
                "kind": "value",
                "param": f.name,
                "annotation": f.annotation,
                "message": f"a value for {shown}: {expected}",
            }
        )
        return {"kind": "array"}  # a placeholder: resolving it asks for a shape, never runs as is


def propose(
    entrypoint: Entrypoint,
    *,
    base: str | os.PathLike[str] | None = None,
    name: str | None = None,
    taken: Collection[str] = (),
    call_fields: Sequence[SetupField] | None = None,
) -> Selected:
    """A profile for ``entrypoint``: :class:`Resolved` (``profile["name"]`` None) or :class:`NeedsInput`.

    ``base`` is the folder the recipe lives in (the target is written relative to it; default:
    the file's folder); ``name`` the profile name (default: the entrypoint's, dots as ``_``, not
    one of ``taken``). For modules, ``call_fields`` are ``__call__``'s parameters (without
    ``self``); without them the call inputs are asked for.
    """
    folder = Path(base) if base is not None else entrypoint.path.parent
    profile_name = name or new_profile_name(entrypoint.name, taken)
    prefix: KeyPath = ("profiles", profile_name)
    builder = _Builder(prefix)
    table: dict[str, Any] = {
        "target": target_text(entrypoint.path, entrypoint.name, folder),
        "kind": entrypoint.kind,
    }
    if entrypoint.kind == "function":
        table["inputs"] = builder.call("inputs", entrypoint.fields, None)
    else:
        table["init"] = builder.call("init", entrypoint.fields, _FILLED_BY_WORKER.get(entrypoint.kind))
        if call_fields is not None:
            fields = list(call_fields)
            if fields and fields[0].name in ("self", "cls") and fields[0].kind != "keyword_only":
                fields = fields[1:]
            table["inputs"] = builder.call("inputs", fields, None)
        else:
            builder.pending.append(_inputs_item(prefix, entrypoint.name))
    if builder.wide:
        table["x64"] = True
    return _combine(resolve_table(profile_name, table, folder), builder.pending, profile_name, table, folder, None)


def propose_site(
    entrypoint: Entrypoint,
    site: CallSite,
    *,
    where: str,
    base: str | os.PathLike[str] | None = None,
    name: str | None = None,
    taken: Collection[str] = (),
) -> Selected:
    """A profile made from a static call site (``discovery/callsites/finder.py``): :class:`Resolved`
    when the site fills every input, else :class:`NeedsInput` with what the site knows filled in
    and each unknown value asked for (``where`` is the site's ``path:line``, for the messages).
    Raises :class:`RecipeError` when the site's values do not check (limits, 64-bit)."""
    folder = Path(base) if base is not None else entrypoint.path.parent
    profile_name = name or new_profile_name(entrypoint.name, taken)
    prefix: KeyPath = ("profiles", profile_name)
    table: dict[str, Any] = {
        "target": target_text(entrypoint.path, entrypoint.name, folder),
        "kind": entrypoint.kind,
    }
    if entrypoint.kind != "function" and site.init:
        table["init"] = copy.deepcopy(site.init)
    if site.inputs is not None:
        table["inputs"] = copy.deepcopy(site.inputs)
    table.update(copy.deepcopy(site.extra))
    pending: list[dict[str, Any]] = []
    for missing in site.missing:
        if missing.where == "inputs":
            item = _inputs_item(prefix, entrypoint.name)
            item["message"] = f"{item['message']} ({where}: {missing.why})"
            pending.append(item)
            continue
        path = (*prefix, *parse_key_path(missing.where))
        pending.append(
            {
                "path": format_key_path(path),
                "kind": "value",
                "message": f"a value for {missing.where} (at {where}: {missing.why}): an input spec",
            }
        )
    return _combine(resolve_table(profile_name, table, folder), pending, profile_name, table, folder, None)


def propose_target(
    path: str | os.PathLike[str],
    name: str,
    *,
    base: str | os.PathLike[str] | None = None,
    taken: Collection[str] = (),
) -> NeedsInput:
    """A skeleton for a target discovery knows nothing about: its inputs are asked for."""
    folder = Path(base) if base is not None else Path(path).parent
    profile_name = new_profile_name(name, taken)
    table: dict[str, Any] = {"target": target_text(Path(path), name, folder)}
    item = _inputs_item(("profiles", profile_name), name)
    return NeedsInput(profile_name, [item], table, folder, None, [item])


def _inputs_item(prefix: KeyPath, target: str) -> dict[str, Any]:
    return {
        "path": format_key_path((*prefix, "inputs")),
        "kind": "inputs",
        "message": f"the call arguments of {target}: {{ args = [...], kwargs = {{...}} }} of input specs, "
        'or { factory = "module:function" }',
    }


def _covered(path: str, by: str) -> bool:
    return path == by or path.startswith(by + ".") or path.startswith(by + "[")


def _combine(
    result: Selected,
    pending: list[dict[str, Any]],
    name: str,
    table: dict[str, Any],
    base: Path,
    recipe: Path | None,
) -> Selected:
    """Add what only the proposal knows to a resolution's answer."""
    if not pending:
        return result
    found = result.missing if isinstance(result, NeedsInput) else []
    rest = [m for m in found if not any(_covered(m["path"], p["path"]) for p in pending)]
    return NeedsInput(name, [*pending, *rest], table, base, recipe, list(pending))


def apply_answers(needs: NeedsInput, answers: Mapping[str, Any]) -> Selected:
    """Fill answers (missing item ``path`` -> TOML-form value) into ``needs.proposal`` and resolve again.

    A dimension is answered with a positive integer, a shape with a list, a value with an input
    spec, inputs with ``{args, kwargs}`` or ``{factory}``. Raises :class:`RecipeError` for answers
    to things not asked, and for answers that do not check.
    """
    table = copy.deepcopy(needs.proposal)
    asked = {str(m["path"]) for m in needs.missing}
    problems: list[Problem] = []
    prefix: KeyPath = ("profiles", needs.name)
    for text, value in answers.items():
        if text not in asked:
            listed = ", ".join(sorted(asked)) or "nothing"
            problems.append(Problem(needs.recipe, None, text, f"not asked for (asked: {listed})"))
            continue
        path = parse_key_path(text)
        if path[: len(prefix)] != prefix or len(path) == len(prefix):
            problems.append(Problem(needs.recipe, None, text, f"not a key of profile {needs.name}"))
            continue
        problem = _set(table, path[len(prefix) :], copy.deepcopy(value))
        if problem:
            problems.append(Problem(needs.recipe, None, text, problem))
    if problems:
        raise RecipeError(problems)
    pending = [p for p in needs.pending if p["path"] not in answers]
    result = resolve_table(needs.name, table, needs.base, recipe=needs.recipe)
    return _combine(result, pending, needs.name, table, needs.base, needs.recipe)


def _set(table: dict[str, Any], path: KeyPath, value: Any) -> str | None:
    node: Any = table
    for part, following in itertools.pairwise(path):
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return "no such list element in the profile"
            node = node[part]
            continue
        if not isinstance(node, dict):
            return "no such table in the profile"
        if part not in node:
            node[part] = [] if isinstance(following, int) else {}
        node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            return "no such list element in the profile"
        node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        return "no such table in the profile"
    return None
