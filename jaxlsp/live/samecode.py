"""Whether an edit left a Python file's program as it was, and where each position went (stdlib
only, no pygls, no processes).

An edit that changes only comments, blank lines, line breaks inside brackets, quotes, redundant
parentheses or trailing commas (what a formatter does on save) gives the same syntax tree: the
file compiles to the same code at other positions. :func:`moves` compares the two trees without
their positions (``ast.dump``) and, when they are equal, pairs each node of the old tree with
its twin in the new one, so that a frame recorded in the old text (a node's start and end: what
CPython's code positions are) can be placed in the new text without tracing again. A docstring
is part of the tree: editing one is a change.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

T = TypeVar("T")

Span = tuple[int, int, int, int]  # line, column, end line, end column (1-based lines, code points)
_AMBIGUOUS: Any = ()


@dataclass
class Moves:
    """Old positions to new ones, as a whole: a node's span (start and end, code-point columns;
    what a frame holds), a node's first and last lines (what a record of lines holds), a node's
    start alone. Two nodes with the same old span that went two ways (``x`` and ``(x)``) make it
    ambiguous: it has no answer, and the caller traces again."""

    spans: dict[Span, Span] = field(default_factory=dict)
    line_spans: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    starts: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    first_lines: dict[int, int] = field(default_factory=dict)

    def span(self, line: int, column: int, end_line: int, end_column: int) -> Span | None:
        return _known(self.spans.get((line, column, end_line, end_column)))

    def lines(self, line: int, end_line: int) -> tuple[int, int] | None:
        return _known(self.line_spans.get((line, end_line)))

    def start(self, line: int, column: int) -> tuple[int, int] | None:
        return _known(self.starts.get((line, column)))

    def first_line(self, line: int) -> int | None:
        return _known(self.first_lines.get(line))


def _known(found: T | None) -> T | None:
    return None if found is None or found == _AMBIGUOUS else found


def moves(old: str, new: str) -> Moves | None:
    """Where each node of ``old`` is in ``new``, when both parse to the same tree; None when
    either does not parse or the trees differ."""
    try:
        before, after = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        if ast.dump(before) != ast.dump(after):
            return None
    except RecursionError:
        return None
    old_lines, new_lines = _lines(old), _lines(new)
    out = Moves()
    for a, b in zip(ast.walk(before), ast.walk(after), strict=True):
        if not isinstance(a, ast.expr | ast.stmt | ast.excepthandler | ast.arg | ast.keyword | ast.alias):
            continue  # no position (a module, an operator, a context) or one frames never hold
        assert isinstance(b, type(a))  # equal dumps: the same node types in the same order
        old_start = (a.lineno, _column(old_lines, a.lineno, a.col_offset))
        new_start = (b.lineno, _column(new_lines, b.lineno, b.col_offset))
        _put(out.first_lines, a.lineno, b.lineno)
        _put(out.starts, old_start, new_start)
        if a.end_lineno is None or b.end_lineno is None:
            continue
        old_end = (a.end_lineno, _column(old_lines, a.end_lineno, a.end_col_offset))
        new_end = (b.end_lineno, _column(new_lines, b.end_lineno, b.end_col_offset))
        _put(out.spans, (*old_start, *old_end), (*new_start, *new_end))
        _put(out.line_spans, (a.lineno, a.end_lineno), (b.lineno, b.end_lineno))
        if isinstance(a, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and a.decorator_list:
            # a decorated definition's code starts at its first decorator (``co_firstlineno``)
            twin = cast(ast.FunctionDef, b)
            first = (a.decorator_list[0].lineno, twin.decorator_list[0].lineno)
            _put(out.line_spans, (first[0], a.end_lineno), (first[1], b.end_lineno))
            _put(out.first_lines, first[0], first[1])
    return out


def _lines(text: str) -> list[str]:
    """The lines as Python numbers them (``\\r\\n``, ``\\r`` and ``\\n`` end a line; a form feed does not)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _put(table: dict[Any, Any], key: Any, value: Any) -> None:
    known = table.get(key)
    if known is None:
        table[key] = value
    elif known != value:
        table[key] = _AMBIGUOUS


def _column(lines: list[str], line: int, byte_column: int | None) -> int:
    """A UTF-8 byte offset (what ``ast`` gives) as a code-point column (what frames hold)."""
    if byte_column is None or byte_column <= 0 or not 0 < line <= len(lines):
        return max(byte_column or 0, 0)
    text = lines[line - 1]
    if text.isascii():
        return byte_column
    return len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))
