"""Lines of key paths in TOML text: tomllib gives values but no positions, so find them here.

A small line-oriented scanner over text that tomllib already accepted. It understands table
headers (``[profiles.mlp]``, ``[[x]]``), dotted keys, quoted keys, inline tables, arrays over
several lines, strings of all four kinds and comments, and records the 1-based line where each
key (or array element) starts. :func:`line_of` falls back to the nearest enclosing key or table.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from jaxlsp.recipes.problems import KeyPath, Problem, format_key_path

_BARE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.lines: dict[KeyPath, int] = {}
        self.table_counts: dict[KeyPath, int] = {}

    # -- characters ---------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def advance(self, count: int = 1) -> None:
        for _ in range(count):
            if self.pos < len(self.text):
                if self.text[self.pos] == "\n":
                    self.line += 1
                self.pos += 1

    def skip_blank(self, newlines: bool) -> None:
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.advance()
            elif ch == "#":
                while self.pos < len(self.text) and self.text[self.pos] != "\n":
                    self.pos += 1
            else:
                return

    def record(self, path: KeyPath) -> None:
        self.lines.setdefault(path, self.line)

    # -- grammar ------------------------------------------------------------------------------

    def document(self) -> None:
        table: KeyPath = ()
        while True:
            self.skip_blank(newlines=True)
            if self.pos >= len(self.text):
                return
            if self.peek() == "[":
                many = self.peek(1) == "["
                self.advance(2 if many else 1)
                key = self.key()
                self.skip_blank(newlines=False)
                self.advance(2 if many else 1)
                if many:
                    index = self.table_counts.get(key, 0)
                    self.table_counts[key] = index + 1
                    self.record(key)
                    table = (*key, index)
                else:
                    table = key
                self.record_prefixes(table)
                continue
            key = self.key()
            self.record_prefixes((*table, *key))
            self.skip_blank(newlines=False)
            self.advance()  # '='
            self.value((*table, *key))
            self.skip_rest_of_line()

    def skip_rest_of_line(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] != "\n":
            self.pos += 1

    def record_prefixes(self, path: KeyPath) -> None:
        for end in range(1, len(path) + 1):
            self.record(path[:end])

    def key(self) -> KeyPath:
        parts: list[str | int] = []
        while True:
            self.skip_blank(newlines=False)
            ch = self.peek()
            if ch in ('"', "'"):
                start = self.pos
                self.string()
                raw = self.text[start : self.pos]
                try:
                    parts.append(str(tomllib.loads(f"k = {raw}")["k"]))
                except tomllib.TOMLDecodeError:
                    parts.append(raw.strip("\"'"))
            else:
                start = self.pos
                while self.peek() and self.peek() in _BARE_CHARS:
                    self.pos += 1
                parts.append(self.text[start : self.pos])
            self.skip_blank(newlines=False)
            if self.peek() == ".":
                self.advance()
                continue
            return tuple(parts)

    def string(self) -> None:
        quote = self.peek()
        if self.text.startswith(quote * 3, self.pos):
            self.advance(3)
            end = self.text.find(quote * 3, self.pos)
            end = len(self.text) if end < 0 else end
            while self.peek(end - self.pos + 3) == quote:  # up to two quotes may end the body
                end += 1
            self.advance(end - self.pos + 3)
            return
        self.advance()
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and quote == '"':
                self.advance(2)
            elif ch == quote:
                self.advance()
                return
            elif ch == "\n":
                return
            else:
                self.advance()

    def value(self, path: KeyPath) -> None:
        self.skip_blank(newlines=False)
        ch = self.peek()
        if ch in ('"', "'"):
            self.string()
        elif ch == "{":
            self.advance()
            while True:
                self.skip_blank(newlines=True)
                if self.peek() in ("}", ""):
                    self.advance()
                    return
                key = self.key()
                self.record_prefixes((*path, *key))
                self.skip_blank(newlines=False)
                self.advance()  # '='
                self.value((*path, *key))
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.advance()
        elif ch == "[":
            self.advance()
            index = 0
            while True:
                self.skip_blank(newlines=True)
                if self.peek() in ("]", ""):
                    self.advance()
                    return
                start = self.pos
                self.record((*path, index))
                self.value((*path, index))
                self.skip_blank(newlines=True)
                if self.peek() == "," or self.pos == start:  # never stall on text tomllib would refuse
                    self.advance()
                index += 1
        else:
            while self.pos < len(self.text) and self.text[self.pos] not in ",]}\n#":
                self.pos += 1


def locate(text: str) -> dict[KeyPath, int]:
    """The 1-based line of every key, table and array element in ``text`` (valid TOML; other
    text gives some lines, never a hang)."""
    scanner = _Scanner(text)
    scanner.document()
    return scanner.lines


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of ``path``, else of its nearest recorded ancestor (a missing key: its table)."""
    for end in range(len(path), 0, -1):
        line = lines.get(path[:end])
        if line is not None:
            return line
    return None


def problem_at(path: Path | None, lines: dict[KeyPath, int], key_path: KeyPath, message: str) -> Problem:
    """A :class:`Problem` of the file at ``path`` about ``key_path``, at its line (:func:`line_of`)."""
    return Problem(path, line_of(lines, key_path), format_key_path(key_path), message)
