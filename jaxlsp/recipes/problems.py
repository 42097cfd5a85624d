"""Key paths (``profiles.mlp.inputs.args[0].shape[1]``) and the one error type of the recipe layer.

A key path is a tuple of TOML keys (``str``) and array indices (``int``). Every problem found in a
recipe carries its key path and, when the recipe came from a file, the 1-based line of that key;
:class:`RecipeError` holds all of them at once.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

KeyPath = tuple[str | int, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SEGMENT = re.compile(r'\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|\'([^\']*)\')\s*')
_INDEX = re.compile(r"\[(\d+)\]")


def quote_key(key: str) -> str:
    """A TOML key as written: bare when it can be, else a basic string."""
    if _BARE.fullmatch(key):
        return key
    return quote_string(key)


def quote_string(text: str) -> str:
    """A TOML basic string (every control character escaped)."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def format_key_path(path: KeyPath) -> str:
    """``("profiles", "mlp", "args", 0)`` -> ``profiles.mlp.args[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + quote_key(part)
    return out


def parse_key_path(text: str) -> KeyPath:
    """The inverse of :func:`format_key_path`; raises ``ValueError`` on a malformed path."""
    parts: list[str | int] = []
    pos = 0
    expect_key = True
    while pos < len(text):
        if text[pos] == "[":
            match = _INDEX.match(text, pos)
            if not match or not parts:
                raise ValueError(f"malformed key path {text!r}")
            parts.append(int(match.group(1)))
            pos = match.end()
            expect_key = False
            continue
        if not expect_key:
            if text[pos] != ".":
                raise ValueError(f"malformed key path {text!r}")
            pos += 1
        match = _SEGMENT.match(text, pos)
        if not match or match.end() == pos:
            raise ValueError(f"malformed key path {text!r}")
        bare, basic, literal = match.groups()
        if bare is not None:
            parts.append(bare)
        elif basic is not None:
            parts.append(_unescape(basic))
        else:
            parts.append(literal or "")
        pos = match.end()
        expect_key = False
    if not parts:
        raise ValueError("empty key path")
    return tuple(parts)


def _unescape(body: str) -> str:
    return str(tomllib.loads(f'k = "{body}"')["k"])


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a recipe: where (file, 1-based line, key path) and what."""

    path: Path | None
    line: int | None
    key_path: str
    message: str

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        key = f"{self.key_path}: " if self.key_path else ""
        return f"{where}{key}{self.message}"

    def to_json(self) -> dict[str, object]:
        return {
            "path": None if self.path is None else str(self.path),
            "line": self.line,
            "keyPath": self.key_path,
            "message": self.message,
        }


class RecipeError(Exception):
    """Everything wrong with a recipe (or a profile, or answers), found in one pass."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


def toml_value(value: object, *, strict: bool = True) -> str:
    """One TOML value, inline (tables as inline tables). Not strict: anything else is described
    (``a set ({1})``) instead of refused, for messages about values that are not TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return quote_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v, strict=strict) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = ", ".join(f"{quote_key(str(k))} = {toml_value(v, strict=strict)}" for k, v in value.items())
        return "{ " + items + " }"
    if strict:
        raise TypeError(f"cannot write {type(value).__name__} as TOML")
    return f"a {type(value).__name__} ({value})"
