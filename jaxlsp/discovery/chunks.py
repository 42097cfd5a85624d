"""Split Python source into logical lines and top-level statements without parsing it.

A regex-driven scanner that knows strings, comments, brackets and line continuations. It is the
reason discovery is fast (only the statements that can matter are handed to libcst) and robust (a
statement that does not parse costs only itself). It recovers from an unclosed bracket at the next
column-0 ``def``/``class``/decorator line and from an unterminated triple-quoted string at the end of
its line, so one half-typed line never hides the rest of a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import cast

_TOKEN = re.compile(r"\"\"\"|'''|\"|'|#|\\\n|[()\[\]{}]|\n")
_SINGLE_END = {
    '"': re.compile(r'(?:[^"\\\n]|\\(?:.|\n))*"'),
    "'": re.compile(r"(?:[^'\\\n]|\\(?:.|\n))*'"),
}
# Column-0 lines that cannot continue a bracketed expression in valid code: an unclosed bracket
# is given up there, so a half-typed line never swallows the definitions and imports below it.
_RECOVERY_START = re.compile(r"(?:def|class|async\s+def|import)\s|@[A-Za-z_]|from\s+\.*[\w.]*\s+import\s")
_FIRST_WORD = re.compile(r"([ \t\f]*)(@|[A-Za-z_]\w*)?")
# Which compound statements each continuation keyword can belong to.
_CONTINUES = {
    "else": frozenset({"if", "for", "while", "try"}),
    "elif": frozenset({"if"}),
    "except": frozenset({"try"}),
    "finally": frozenset({"try"}),
}
_HEADER_WORDS = frozenset({"def", "class", "async"})
# Statements that own an indented body; an indented line after any other statement is an
# indentation error and stands alone instead of breaking the statement above it.
_COMPOUND = frozenset({
    "def", "class", "async", "@", "if", "elif", "else", "for", "while", "try", "except", "finally",
    "with", "match", "case",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class LogicalLine:
    """One logical line: physical lines ``start``..``end`` (0-based, inclusive)."""

    start: int
    end: int
    indent: int
    word: str  # first identifier, "@" for a decorator, "" otherwise
    code: bool  # False for blank and comment-only lines
    broken: bool = False  # ended by recovery from an unclosed bracket


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement at one indentation level: physical lines ``start``..``end`` (inclusive)."""

    start: int
    end: int
    header: int  # the line of the def/class keyword (after decorators); ``start`` otherwise
    word: str  # the first word of the header line


def normalize_newlines(text: str) -> str:
    if "\r" in text:
        return text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _triple_end(text: str, quote: str, pos: int) -> int:
    """Index just past the closing triple quote, or -1 when the string is unterminated."""
    while True:
        found = text.find(quote, pos)
        if found < 0:
            return -1
        backslashes = 0
        i = found - 1
        while i >= pos and text[i] == "\\":
            backslashes += 1
            i -= 1
        if backslashes % 2 == 0:
            return found + 3
        pos = found + 1


def logical_lines(text: str) -> list[LogicalLine]:
    """Logical lines of ``text`` (already newline-normalized), in order, blank lines included."""
    return list(iter_logical_lines(text))


def iter_logical_lines(text: str) -> Iterator[LogicalLine]:
    """:func:`logical_lines` one at a time (a 1 MB file's scan is then sliced with its parses)."""
    return cast(Iterator[LogicalLine], ticking_logical_lines(text, 0))


def ticking_logical_lines(text: str, every: int) -> Iterator[LogicalLine | None]:
    """:func:`iter_logical_lines`, with a ``None`` (a tick) after every ``every`` tokens scanned
    (never when ``every`` is 0): one logical line or statement can be long (100,000 decorator
    lines are one statement: 0.15 s of scanning), and a caller that runs in slices
    (:func:`jaxlsp.discovery.index.summarize_steps`) needs to be able to pause inside it."""
    n = len(text)
    scanned = 0
    line = 0
    depth = 0
    start_line = 0
    start_pos = 0
    pos = 0
    while True:
        m = _TOKEN.search(text, pos)
        if m is None:
            if start_pos < n:
                # Still inside brackets at the end: the last newline already moved ``line`` on.
                end = line - 1 if text.endswith("\n") and line > start_line else line
                yield _make_line(text, start_pos, start_line, end)
            return
        tok = m.group()
        pos = m.end()
        if every:
            scanned += 1
            if scanned == every:
                scanned = 0
                yield None
        if tok == "\n":
            broken = bool(depth) and _RECOVERY_START.match(text, pos) is not None
            if broken:
                depth = 0  # an unclosed bracket: give up on it at the next definition
            if depth == 0:
                yield _make_line(text, start_pos, start_line, line, broken)
                start_line = line + 1
                start_pos = pos
            line += 1
        elif tok == "\\\n":
            line += 1
        elif tok == "#":
            eol = text.find("\n", pos)
            pos = n if eol < 0 else eol
        elif tok in ("(", "[", "{"):
            depth += 1
        elif tok in (")", "]", "}"):
            depth = max(0, depth - 1)
        elif tok in ('"', "'"):
            sm = _SINGLE_END[tok].match(text, pos)
            if sm is None:  # unterminated: the string ends with its line
                eol = text.find("\n", pos)
                pos = n if eol < 0 else eol
            else:
                line += text.count("\n", pos, sm.end())
                pos = sm.end()
        else:  # triple quote
            end = _triple_end(text, tok, pos)
            if end < 0:  # unterminated: treat the rest of its line as the string and go on
                eol = text.find("\n", pos)
                pos = n if eol < 0 else eol
            else:
                line += text.count("\n", pos, end)
                pos = end


def _make_line(text: str, start_pos: int, start_line: int, end_line: int, broken: bool = False) -> LogicalLine:
    m = _FIRST_WORD.match(text, start_pos)
    assert m is not None  # the pattern matches the empty string
    indent = len(m.group(1))
    after = m.end(1)
    code = after < len(text) and text[after] not in "#\n"
    return LogicalLine(start_line, end_line, indent, m.group(2) or "", code, broken)


def statements(lines: list[LogicalLine], indent: int = 0, first: int = 0, last: int | None = None) -> list[Statement]:
    """Group logical lines into statements whose header sits at column ``indent``
    (:func:`iter_statements` as a list)."""
    return list(iter_statements(lines, indent, first, last))


def iter_statements(
    lines: Iterable[LogicalLine], indent: int = 0, first: int = 0, last: int | None = None
) -> Iterator[Statement]:
    """Group logical lines into statements whose header sits at column ``indent``, one at a time
    (:func:`ticking_statements` without ticks)."""
    return cast(Iterator[Statement], ticking_statements(lines, indent, first, last))


def ticking_statements(
    lines: Iterable[LogicalLine | None], indent: int = 0, first: int = 0, last: int | None = None
) -> Iterator[Statement | None]:
    """Group logical lines into statements whose header sits at column ``indent``, one at a time;
    a ``None`` among the lines (a tick of :func:`ticking_logical_lines`) is passed on at once.

    Only lines ``first``..``last`` (physical, inclusive) are considered, which lets the same
    function split a class body. Lines indented deeper belong to the statement above them;
    decorators join the definition they decorate; ``else``/``except``/... join the compound
    statement that accepts them. A statement's end is its last code line, never a trailing comment.
    Damage stays local: nothing continues a line that never closed its brackets, and a line
    dedented below the body it follows (a ``def`` with one stray space) stands alone.
    """
    cur_start = cur_end = cur_header = -1
    cur_word = ""
    body_indent = indent  # the indentation of the current statement's body, once seen
    pending_decorator = False
    after_broken = False
    for ll in lines:
        if ll is None:
            yield None
            continue
        if ll.start < first or (last is not None and ll.start > last):
            continue
        if not ll.code:
            continue
        if cur_start >= 0 and not after_broken:
            if ll.indent > indent and ll.indent >= body_indent and cur_word in _COMPOUND:
                cur_end = ll.end
                body_indent = ll.indent if body_indent == indent else min(body_indent, ll.indent)
                pending_decorator = False  # a decorator is followed by its def, not by a body
                after_broken = ll.broken
                continue
            decorated = pending_decorator and ll.word in _HEADER_WORDS | {"@"}
            if ll.indent == indent and (decorated or cur_word in _CONTINUES.get(ll.word, ())):
                if pending_decorator and ll.word in _HEADER_WORDS:
                    cur_header, cur_word, pending_decorator = ll.start, ll.word, False
                cur_end = ll.end
                after_broken = ll.broken
                continue
        if cur_start >= 0:
            yield Statement(cur_start, cur_end, cur_header, cur_word)
        cur_start, cur_end, cur_header, cur_word = ll.start, ll.end, ll.start, ll.word
        body_indent = indent
        pending_decorator = ll.word == "@"
        after_broken = ll.broken
    if cur_start >= 0:
        yield Statement(cur_start, cur_end, cur_header, cur_word)
