"""A kept graph with its source positions moved to an edited file's text, for an edit that left
the program as it was (:mod:`jaxlsp.live.samecode`): the same program, traced from the new text,
differs only in those positions and in the file's hash (stdlib only).

Frames are interned (``tables.frames`` of the compact form), so moving them costs the distinct
frames, not the equations: the node columns, params, shapes and values are shared with the
graph it came from. Every other record of a position (a region's, a jaxtyping contract's) is
a member with ``path`` and ``line`` in the header; one that cannot be placed in the new text, or
a line without a path, makes the answer None: the caller traces again.
"""

from __future__ import annotations

import copy
from typing import Any

from jaxlsp.graph.compact_write import FRAME_WIDTH
from jaxlsp.graph.packed import Packed
from jaxlsp.live.samecode import Moves


class Unplaced(Exception):
    """A recorded position that the moves do not place."""


def relocate(packed: Packed, moved: dict[str, Moves], sources: dict[str, str]) -> Packed | None:
    """``packed`` with every position in the files ``moved`` names (spelled as the graph spells
    them) placed in their new text, and ``sources`` (spelled path -> sha256) replacing the hashes
    of those files; None when a position cannot be placed."""
    try:
        frames = list(packed.frame_json)
        flat = list(packed._tables["frames"])
        for k, frame in enumerate(packed.frame_json):
            if frame["path"] in moved and "package" not in frame and "cell" not in frame:
                placed = _place(frame, moved[frame["path"]])
                frames[k] = placed
                at = k * FRAME_WIDTH
                flat[at + 1 : at + 5] = [placed["line"], placed["column"], placed["endLine"], placed["endColumn"]]
        header = copy.deepcopy(packed.header)
        header["sources"] = {**header.get("sources", {}), **sources}
        for key, member in header.items():
            if key not in ("sources", "format", "version", "backend", "versions", "target", "profile"):
                header[key] = _walk(member, moved)
    except Unplaced:
        return None
    return packed.relocated(frames, flat, header)


def _place(record: dict[str, Any], moves: Moves) -> dict[str, Any]:
    """``record`` (a frame, or a member with a path and lines) with its positions in the new text:
    a span as a whole (a frame is one node's), lines as a whole, or a start or a line alone."""
    out = dict(record)
    keys = [k for k in ("line", "column", "endLine", "endColumn") if k in record]
    where = f"{record['path']}:" + ":".join(str(record[k]) for k in keys)
    try:
        old = [int(record[k]) for k in keys]
    except (TypeError, ValueError):
        raise Unplaced(where) from None
    found: Any
    if keys == ["line", "column", "endLine", "endColumn"]:
        found = moves.span(*old)
    elif keys == ["line", "endLine"]:
        found = moves.lines(*old)
    elif keys == ["line", "column"]:
        found = moves.start(*old)
    elif keys == ["line"]:
        line = moves.first_line(*old)
        found = None if line is None else (line,)
    else:
        found = None
    if found is None:
        raise Unplaced(where)
    out.update(zip(keys, found, strict=True))
    return out


def _walk(item: Any, moved: dict[str, Moves]) -> Any:
    """``item`` with each position record in a moved file placed; a line the walk cannot tie to
    a file raises :class:`Unplaced`."""
    if isinstance(item, list):
        return [_walk(x, moved) for x in item]
    if not isinstance(item, dict):
        return item
    out = {k: _walk(v, moved) for k, v in item.items()}
    path = out.get("path")
    if any(k in out for k in ("line", "endLine")):
        if not isinstance(path, str):
            raise Unplaced("a line without a path")
        if path in moved and "package" not in out and "cell" not in out:
            out = _place(out, moved[path])
    return out
