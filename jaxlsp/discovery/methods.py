"""A method as a target (``Term.vf``, ``Solver.step``): an entrypoint named ``Class.method``.

Discovery offers functions and module classes; a method that the workspace calls on an instance
(a diffrax term's vector field, a solver's step) is a target all the same when it is asked for
by name: its call sites are those of ``Class.method`` (:mod:`callsites` reads
``obj.method(...)`` on instances of the class) and a run of an example stops at its first call.
Only the file's text is read (the last definition wins, as at run time).
"""

from __future__ import annotations

import ast
from pathlib import Path

from jaxlsp.discovery.entrypoints import Entrypoint, Span


def method_entry(path: Path, name: str, text: str) -> Entrypoint | None:
    """The entrypoint of method ``name`` (``Class.method``, ``Outer.Inner.method``) defined in
    ``text``, the source of ``path``; None when ``name`` names no method there."""
    parts = name.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    body: list[ast.stmt] = tree.body
    for part in parts[:-1]:
        cls = _last(body, part, (ast.ClassDef,))
        if not isinstance(cls, ast.ClassDef):
            return None
        body = cls.body
    fn = _last(body, parts[-1], (ast.FunctionDef,))
    if not isinstance(fn, ast.FunctionDef) or fn.end_lineno is None:
        return None
    lines = text.splitlines()
    first = min([d.lineno for d in fn.decorator_list] + [fn.lineno]) - 1
    header, end = fn.lineno - 1, fn.end_lineno - 1
    return Entrypoint(
        path=path,
        name=name,
        kind="function",
        header=Span(header, fn.col_offset, header, len(lines[header]) if header < len(lines) else 0),
        body=Span(first, fn.col_offset, end, len(lines[end]) if end < len(lines) else 0),
        decorators=tuple(ast.unparse(d) for d in fn.decorator_list),
        fields=(),
        reason=f"a method of {'.'.join(parts[:-1])}",
        method=True,
    )


def _last(body: list[ast.stmt], name: str, kinds: tuple[type, ...]) -> ast.stmt | None:
    found: ast.stmt | None = None
    for stmt in body:
        if isinstance(stmt, kinds) and getattr(stmt, "name", None) == name:
            found = stmt
        elif isinstance(stmt, ast.If | ast.Try):
            for inner in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", [])):
                found = _last(inner, name, kinds) or found
    return found
