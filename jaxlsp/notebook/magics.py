"""IPython syntax in code cells, neutralised without shifting lines (stdlib only).

Notebook cells hold lines that are not Python: line magics (``%matplotlib inline``), shell escapes
(``!pip install flax``, ``files = !ls``), help (``model?``) and cell magics (``%%time``,
``%%bash``). Each such line becomes ``pass`` at its own indentation (a magic can be the only line
of a block), so every other line keeps its number and its columns. Only the start of a logical
line counts, as in IPython: a ``%`` inside a triple-quoted string or a bracket stays as it is.

A cell magic whose body is Python (``%%time``, ``%%capture``...) keeps its body; any other cell
magic (``%%bash``, ``%%writefile``, ``%%html``) blanks its whole cell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Cheap test first: most cells have none of this, and pay one regex search.
_CANDIDATE = re.compile(r"^[ \t]*(?:[%!?]|[A-Za-z_][\w.]*\?\??[ \t]*$|[A-Za-z_][\w., \t]*=[ \t]*[%!](?!=))", re.M)
_LINE_MAGIC = re.compile(
    r"[ \t]*(?:[%!]|\?\??[A-Za-z_]|[A-Za-z_][\w.]*\?\??[ \t]*$|[A-Za-z_][\w., \t]*=[ \t]*[%!](?!=))"
)
_CELL_MAGIC = re.compile(r"[ \t]*%%([A-Za-z_]\w*)")
# The string and bracket tokens that decide whether a line starts a logical line.
_TOKEN = re.compile(r"\"\"\"|'''|\"|'|#|[()\[\]{}]|\\$")
_SINGLE_END = {'"': re.compile(r'(?:[^"\\]|\\.)*"'), "'": re.compile(r"(?:[^'\\]|\\.)*'")}
#: Cell magics that run their body as Python.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "pypy"})


@dataclass(frozen=True, slots=True)
class Neutralised:
    """A line that is not Python: 0-based ``line`` within its cell, and the text it had."""

    line: int
    text: str


def neutralise(source: str) -> tuple[str, list[Neutralised]]:
    """``source`` (one cell, newlines normalised) with IPython-only lines replaced by ``pass``
    (same indentation, same line count), and the lines that were replaced."""
    found_at = [m.start() for m in _CANDIDATE.finditer(source)]
    if not found_at:
        return source, []
    lines = source.split("\n")
    last = source.count("\n", 0, found_at[-1])  # no line below the last candidate needs scanning
    found: list[Neutralised] = []
    cell = _CELL_MAGIC.match(lines[0])
    if cell is not None:
        found.append(Neutralised(0, lines[0]))
        if cell.group(1) not in PYTHON_CELL_MAGICS:  # the body is bash, HTML, a file to write...
            found.extend(Neutralised(i, text) for i, text in enumerate(lines[1:], 1) if text.strip())
            return "\n".join(["pass", *("" for _ in lines[1:])]), found
        lines[0] = "pass"
    for i in _statement_starts(lines, 1 if cell is not None else 0, last):
        text = lines[i]
        if _LINE_MAGIC.match(text):
            found.append(Neutralised(i, text))
            indent = len(text) - len(text.lstrip(" \t"))
            lines[i] = text[:indent] + "pass"
    return "\n".join(lines), found


def _statement_starts(lines: list[str], first: int, last: int) -> list[int]:
    """Indices of the lines ``first``..``last`` that start a logical line (outside strings,
    brackets and continuations)."""
    starts: list[int] = []
    depth = 0
    quote = ""  # the open triple quote, if any
    continued = False
    for i in range(first, min(last, len(lines) - 1) + 1):
        text = lines[i]
        if not quote and depth == 0 and not continued:
            starts.append(i)
        continued = False
        pos = 0
        if quote:
            end = text.find(quote)
            if end < 0:
                continue
            quote, pos = "", end + 3
        while True:
            m = _TOKEN.search(text, pos)
            if m is None:
                break
            tok = m.group()
            pos = m.end()
            if tok == "#":
                break
            if tok == "\\":
                continued = True
            elif tok in ("(", "[", "{"):
                depth += 1
            elif tok in (")", "]", "}"):
                depth = max(0, depth - 1)
            elif tok in ('"', "'"):
                closed = _SINGLE_END[tok].match(text, pos)
                pos = closed.end() if closed is not None else len(text)
            else:
                end = text.find(tok, pos)
                if end < 0:
                    quote = tok
                    break
                pos = end + 3
    return starts
