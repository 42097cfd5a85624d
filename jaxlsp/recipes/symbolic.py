"""Annotated code traced without a run: the jaxtyping dimension names become symbolic dimensions.

A target nothing calls has only its definition to go on. When the proposal made from it
(``propose.py``) still needs input, and what it needs is only the sizes of dimensions that
jaxtyping annotations name (``x: Float[Array, "n d"]``) or the shape of an annotation whose rank
is left open by ``*batch`` or ``...``, :func:`propose_symbolic` resolves it with those names in
the profile's ``symbolic`` list: JAX traces the program for any size (shape polymorphism), and the
graph says ``f32[n,m]``. Fixed sizes (``"n 3"``) stay concrete; ``*batch`` is one dimension named
``batch`` (shared by every parameter that names it, as jaxtyping checks it) and ``...`` one
dimension of its own, named after its parameter and position (``x_0``). The dtype is the one the
annotation's class says (``annotations.JAXTYPING_DTYPES``).

A program that cannot be traced symbolically (a Python ``int()`` of a dimension, a comparison of
one, a dimension given to NumPy) fails with JAX's own error; :func:`fallback` turns that failure
back into the proposal's needs-input answer, saying which dimension forced it. A shape error that
holds only for some sizes (a reshape that needs ``n`` divisible by 4) is not such a failure: it is
the user's error, shown at its line (``worker/core/failures.py`` says for which sizes).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jaxlsp.recipes.annotations import _JAXTYPING, JAXTYPING_DTYPES, Dim, _strip
from jaxlsp.recipes.problems import RecipeError
from jaxlsp.recipes.profile import resolve_table
from jaxlsp.recipes.propose import apply_answers, propose
from jaxlsp.recipes.selection import NeedsInput, Resolved

if TYPE_CHECKING:
    from jaxlsp.discovery.entrypoints import Entrypoint
    from jaxlsp.discovery.summary import SetupField

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def annotation_shape(param: str, annotation: str) -> list[Dim] | None:
    """The shape a jaxtyping annotation names, with ``*batch`` as the one dimension ``batch`` and
    ``...`` as one dimension ``{param}_{i}``; None when it is not a jaxtyping array annotation of a
    known dtype class or a dimension is an expression (``n+1``)."""
    match = _JAXTYPING.fullmatch(_strip(annotation))
    if match is None or match.group("dtype") not in JAXTYPING_DTYPES:
        return None
    shape: list[Dim] = []
    for i, token in enumerate(match.group("dims").split()):
        if token.isdigit():
            if int(token) <= 0:
                return None
            shape.append(int(token))
            continue
        name = token.lstrip("*").lstrip("#")  # variadic, broadcastable: one symbol all the same
        if name.startswith("_") and len(name) > 1:
            name = name[1:]  # ``_name``: an unchecked named dimension
        if token == "..." or name == "_":
            shape.append(f"{param}_{i}")  # anonymous: a symbol of its own, never shared
        elif _NAME.fullmatch(name):
            shape.append(name)
        else:
            return None
    return shape


def call_fields(entry: Entrypoint) -> list[SetupField] | None:
    """A module target's ``__call__`` parameters (``self`` left out), read from its file; None when
    it defines none itself (an inherited ``__call__`` says nothing here)."""
    from jaxlsp.discovery.summary import SetupField

    if entry.kind == "function" or entry.path.suffix != ".py":
        return None
    try:
        tree = ast.parse(entry.path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    body: Sequence[ast.stmt] = tree.body
    cls: ast.ClassDef | None = None
    for part in entry.name.split("."):
        cls = next((s for s in body if isinstance(s, ast.ClassDef) and s.name == part), None)
        if cls is None:
            return None
        body = cls.body
    call = next((s for s in body if isinstance(s, ast.FunctionDef) and s.name == "__call__"), None)
    if call is None:
        return None
    args = call.args

    def field(a: ast.arg, kind: str, default: ast.expr | None) -> SetupField:
        annotation = ast.unparse(a.annotation) if a.annotation is not None else None
        return SetupField(a.arg, annotation, ast.unparse(default) if default is not None else None, kind)

    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [
        field(a, "positional_only" if i < len(args.posonlyargs) else "positional", d)
        for i, (a, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    if args.vararg is not None:
        out.append(field(args.vararg, "var_positional", None))
    out += [field(a, "keyword_only", d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg is not None:
        out.append(field(args.kwarg, "var_keyword", None))
    if out and out[0].name in ("self", "cls") and out[0].kind != "keyword_only":
        out = out[1:]
    return out


def propose_symbolic(entry: Entrypoint, proposal: NeedsInput) -> Resolved | None:
    """``proposal`` (the definition's, needing input) resolved with the dimensions its jaxtyping
    annotations name traced symbolically; None when it needs anything else (an unannotated
    parameter, a bare ``jax.Array``, a dimension written as an expression). The result's
    ``fallback`` is ``proposal``: what is asked when the trace cannot stay symbolic."""
    if entry.method:
        return None  # a method's instance is not in its annotations
    try:
        needs: Resolved | NeedsInput = proposal
        if entry.kind != "function":
            fields = call_fields(entry)
            if fields is None:
                return None
            needs = propose(entry, base=proposal.base, name=proposal.name, call_fields=fields)
        made = _symbolic(needs) if isinstance(needs, NeedsInput) else needs
    except RecipeError:
        return None  # over the limits, 64-bit without x64: the proposal's answer says what is wrong
    return None if made is None else dataclasses.replace(made, fallback=proposal)


def _symbolic(needs: NeedsInput) -> Resolved | None:
    shapes: dict[str, Any] = {}
    for item in needs.missing:
        if item.get("kind") == "dimension":
            continue
        shape = None
        if item.get("kind") == "shape" and item.get("annotation") and item.get("param"):
            shape = annotation_shape(str(item["param"]), str(item["annotation"]))
        if shape is None:
            return None
        shapes[str(item["path"])] = shape
    filled = apply_answers(needs, shapes) if shapes else needs
    if isinstance(filled, Resolved):
        return filled
    names: list[str] = []
    for item in filled.missing:
        if item.get("kind") != "dimension":
            return None
        names.append(str(item["name"]))
    table = copy.deepcopy(filled.proposal)
    table["symbolic"] = [*table.get("symbolic", []), *names]
    made = resolve_table(filled.name, table, filled.base, recipe=filled.recipe)
    return made if isinstance(made, Resolved) else None


def forced(symbolic: Sequence[str] | None, names: Sequence[str]) -> list[str] | None:
    """Of the dimensions a failure says could not stay symbols (the worker's
    ``ErrorInfo.symbolic``; None: not such a failure), those among ``names`` (empty: one of them,
    JAX did not say which)."""
    if symbolic is None:
        return None
    return [n for n in symbolic if n in names]


def fallback(resolved: Resolved, message: str, symbolic: Sequence[str] | None, where: str = "") -> NeedsInput | None:
    """What to ask instead of a symbolic proposal whose trace failed (``message``, at ``where``,
    ``file.py:LINE``) because a dimension could not stay a symbol (``symbolic``, the failure's
    dimensions): the proposal's needs-input answer, the forcing dimension's item first and saying
    why. None when ``resolved`` has no fallback or the failure is another."""
    names = list(resolved.profile.get("symbolic", []))
    needs = resolved.fallback
    dims = forced(symbolic, names) if needs is not None and names else None
    if needs is None or dims is None:
        return None
    which = ", ".join(dims) if dims else f"one of {', '.join(names)}"
    cause = message.split(" This error arises", 1)[0].rstrip(". ")  # JAX's general advice left out
    cause = cause.split(" failed: ", 1)[1] if cause.startswith("tracing ") and " failed: " in cause else cause
    why = f"{which} cannot be traced for any size ({f'{where}: ' if where else ''}{cause})"
    items = [copy.deepcopy(i) for i in needs.missing]
    first = [i for i in items if i.get("kind") == "dimension" and i.get("name") in dims]
    rest = [i for i in items if i not in first]
    for item in first or rest[:1]:
        item["message"] = f"{item['message']}; {why}"
        item["symbolic"] = why
    return dataclasses.replace(needs, missing=[*first, *rest])
