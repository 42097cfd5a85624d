"""Bounds on a recipe, checked before the TOML parsers and the checks spend time on it.

Two inputs made tomllib (and tomlkit, and :mod:`jaxlsp.recipes.locate`) slow or crash, even before
the workspace is trusted (``jaxlsp/environment`` reads the recipe to pick the interpreter):

- a dotted key of 20,000 parts (``a.a.a... = 1``): tomllib builds the nested tables in time
  quadratic in the parts (8.4 s for 20,000; locate 4.6 s more). :func:`check_text` finds a key of
  more than :data:`MAX_KEY_PARTS` parts in the raw text, with strings and comments masked, in one
  linear regular-expression pass (about 10 ms for 1 MiB), before any parser runs.
- an integer of 5,000 digits (``seed = 999...``): Python 3.11 refuses to convert more than 4,300
  digits (``ValueError``, then an internal error) and every message that quoted a big integer
  (``str(value)``) raised again. No recipe value needs more than 64 bits (a seed, a size, a value
  of an int64 or uint64 array): :func:`wide_integers` finds the wider ones with their key paths,
  and :func:`long_integer_line` says on which line tomllib met one it could not convert.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jaxlsp.recipes.problems import KeyPath, Problem, RecipeError

MAX_KEY_PARTS = 32  # parts of one dotted key or table header (the recipe's nesting bound, recipe.py)
MAX_INT_BITS = 64  # bits of any integer in a recipe (int64 and uint64 values are the widest)
SHOWN_KEY = 40  # characters of an over-long key quoted in the problem

# Strings (all four kinds) and comments, masked before keys are counted: their dots are not keys'.
_MASKED = re.compile(r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*', re.S)
_NOT_NEWLINE = re.compile(r"[^\n]")
_BARE = "A-Za-z0-9_-"
# A dotted key of more than MAX_KEY_PARTS parts. It starts only where a bare key can start (the
# lookbehind) and never backtracks (possessive quantifiers), so the scan stays linear in the text.
_LONG_KEY = re.compile(
    rf"(?<![{_BARE}])[{_BARE}]++(?:[ \t]*+\.[ \t]*+[{_BARE}]++){{{MAX_KEY_PARTS},}}",
)
_LONG_DIGITS = re.compile(r"(?<![0-9_])[0-9][0-9_]{4299,}")  # what Python 3.11 will not convert


def masked(text: str) -> str:
    """``text`` with each string replaced by ``s`` and spaces and each comment by spaces, every
    newline kept: positions and lines stay those of ``text``."""

    def blank(match: re.Match[str]) -> str:
        found = match.group()
        return ("s" if found[0] in "\"'" else " ") + _NOT_NEWLINE.sub(" ", found[1:])

    return _MASKED.sub(blank, text)


def check_text(text: str, path: Path | None) -> None:
    """Raise :class:`RecipeError` for a dotted key or table header of more than
    :data:`MAX_KEY_PARTS` parts, at its line, before a TOML parser reads ``text``."""
    match = _LONG_KEY.search(masked(text))
    if match is None:
        return
    line = text.count("\n", 0, match.start()) + 1
    written = text[match.start() : match.end()]
    shown = written if len(written) <= SHOWN_KEY else written[:SHOWN_KEY] + "..."
    parts = match.group().count(".") + 1
    raise RecipeError(
        [Problem(path, line, shown, f"not accepted: a dotted key of {parts:,} parts (at most {MAX_KEY_PARTS})")]
    )


def wide_integers(data: Any) -> Iterator[tuple[KeyPath, int]]:
    """Key paths of the integers wider than :data:`MAX_INT_BITS` in parsed TOML, with their bits
    (``data`` is already bounded in depth by the caller)."""
    stack: list[tuple[KeyPath, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
            yield path, value.bit_length()


def too_wide(bits: int) -> str:
    return f"not accepted: an integer of {bits:,} bits (a recipe's integers fit {MAX_INT_BITS} bits)"


def long_integer_line(text: str) -> int | None:
    """The 1-based line of the first decimal integer too long for Python to convert, outside
    strings and comments; None when there is none."""
    match = _LONG_DIGITS.search(masked(text))
    return None if match is None else text.count("\n", 0, match.start()) + 1


def too_long() -> str:
    return f"not accepted: an integer of more than 4,300 digits (a recipe's integers fit {MAX_INT_BITS} bits)"
