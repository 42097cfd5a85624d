"""Which lines a save changed, so that the targets defined around them are traced first (no pygls,
no processes here).

A save of a file with several live targets queues them all, one trace at a time: the one the user
is editing should not wait behind the others. The lines are compared with the text the last open
or save of the file had (``difflib``, line by line).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def changed_lines(old: str, new: str) -> list[tuple[int, int]]:
    """0-based ranges ``(first, last)`` of lines of ``new`` that differ from ``old``; a deletion
    is the line after it (and the one before), where the removed lines were."""
    out: list[tuple[int, int]] = []
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        out.append((max(j1 - 1, 0), j1) if j1 == j2 else (j1, j2 - 1))
    return out


def touches(ranges: Sequence[tuple[int, int]], first: int, last: int) -> bool:
    """Whether any of ``ranges`` overlaps the 0-based lines ``first`` to ``last``."""
    return any(a <= last and b >= first for a, b in ranges)
