"""Whether an edit left a Python file's program as it was, and where each position went (stdlib
only, no pygls, no processes).

An edit that changes only comments, blank lines, line breaks inside brackets, quotes, redundant
parentheses or trailing commas (what a formatter does on save) gives the same syntax tree: the
file compiles to the same code at other positions. :func:`moves` compares the two trees without
their positions (``ast.dump``) and, when they are equal, pairs each node of the old tree with
its twin in the new one, so that a frame recorded in the old text (a node's start and end: what
CPython's code positions are) can be placed in the new text without tracing again. A docstring
is part of the tree: editing one is a change.

Two things the tree does not hold change what the same tree runs, and are refused: the file's
encoding (a coding cookie or a byte-order mark added, removed or changed decodes the same bytes
to other strings; only UTF-8 is compared), and code that reads positions at run time (a frame's
``f_lineno``, ``inspect.currentframe``, ``sys._getframe``, ``__code__.co_firstlineno``,
``inspect.getsource``, ``traceback``: :func:`reads_positions`), whose values a blank line or a
comment changes. Reading the file's own text some other way (``open(__file__)``) is not seen.
"""

from __future__ import annotations

import ast
import codecs
import io
import tokenize
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

T = TypeVar("T")

Span = tuple[int, int, int, int]  # line, column, end line, end column (1-based lines, code points)
_AMBIGUOUS: Any = ()
_BOM = "\ufeff"

# names whose use reads a line, a frame or the source text while the program runs: an attribute,
# a name, an imported name or a string (``getattr(frame, "f_lineno")``) spelled so
_READS_POSITIONS = frozenset(
    {
        "f_lineno", "f_lasti", "f_back", "f_code", "co_firstlineno", "co_lines", "co_positions",
        "co_lnotab", "co_linetable", "__code__", "tb_lineno", "tb_lasti", "tb_frame", "tb_next",
        "__traceback__", "_getframe", "_current_frames", "currentframe", "getframeinfo",
        "getouterframes", "getinnerframes", "getsource", "getsourcelines", "findsource",
        "getcomments", "getlineno", "getblock", "extract_stack", "extract_tb", "format_stack",
        "walk_stack", "walk_tb", "print_stack", "_getframemodulename",
    }
)  # fmt: skip
_READING_MODULES = frozenset({"traceback", "linecache", "tokenize"})  # each reads lines or frames
_INSPECT_CALLS = frozenset({"stack", "trace"})  # generic names: only as ``inspect.stack``


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
    either does not parse, the trees differ, the declared encodings differ (or are not UTF-8), or
    the code reads positions (:func:`reads_positions`)."""
    coding = _encoding(old)
    if coding is None or coding != _encoding(new):
        return None
    old, new = old.removeprefix(_BOM), new.removeprefix(_BOM)  # the tokenizer skips it: no column
    try:
        before, after = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        if ast.dump(before) != ast.dump(after):
            return None
    except RecursionError:
        return None
    if _reads_positions(before):
        return None  # the same tree, other values: a frame's line moved with the blank lines
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


def reads_positions(text: str) -> bool:
    """Whether ``text`` names something that reads a line number, a frame or source text while it
    runs (what moving the text changes, where the tree does not); True when it does not parse."""
    try:
        return _reads_positions(ast.parse(text.removeprefix(_BOM)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True


def _reads_positions(tree: ast.AST) -> bool:
    inspect = {"inspect"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] in _READING_MODULES:
                    return True
                if alias.name == "inspect":
                    inspect.add(alias.asname or "inspect")
        elif isinstance(node, ast.ImportFrom):
            # ``from .traceback import x`` is a workspace module of that name: not the library
            module = (node.module or "").partition(".")[0] if node.level == 0 else ""
            names = {alias.name for alias in node.names}
            if module in _READING_MODULES or names & _READS_POSITIONS:
                return True
            if module == "inspect" and names & (_INSPECT_CALLS | {"*"}):
                return True
        elif isinstance(node, ast.Attribute):
            if node.attr in _READS_POSITIONS:
                return True
            if node.attr in _INSPECT_CALLS and isinstance(node.value, ast.Name) and node.value.id in inspect:
                return True
        elif _named(node) in _READS_POSITIONS:
            return True
    return False


def _named(node: ast.AST) -> str | None:
    """The name a name node or a string constant spells."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _encoding(text: str) -> str | None:
    """The encoding Python reads ``text``'s file with (its BOM or coding cookie), when that is
    UTF-8 (``utf-8``, or ``utf-8-sig`` with a BOM); None for any other, or an unknown one."""
    try:
        found, _ = tokenize.detect_encoding(io.BytesIO(text.encode("utf-8")).readline)
        name = codecs.lookup(found).name
    except (SyntaxError, LookupError, UnicodeError):
        return None
    return name if name in ("utf-8", "utf-8-sig") else None


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
