"""The graph's JSON forms in and out: what the rest of jaxlsp reads and writes graphs with
(docs/graph-format.md): ``to_json`` / ``to_compact`` / ``from_json``, ``dumps`` / ``loads``,
``write`` / ``read``.

Stdlib only, Python >= 3.10: the capture worker imports this module inside the user's interpreter.

A graph has two JSON forms: the expanded one (version 1, :mod:`jaxlsp.graph.expanded_write` and
``expanded_read``) and the compact one (version 2, :mod:`jaxlsp.graph.compact_write` and
``packed``). :func:`from_json` reads either (and the earlier workers' pipe form) and is strict: a
``ValueError`` names the key path (``nodes[3].source.endLine: ...``) of the first problem. Text
can be made and parsed a slice at a time (``sliced``: a thread beside the server's event loop)
and files are written atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from jaxlsp.graph import collector, slices
from jaxlsp.graph.expanded_read import read_graph
from jaxlsp.graph.expanded_write import to_json
from jaxlsp.graph.model import COMPACT_VERSION, FORMAT, VERSION_KEYS, Graph

# to_json and VERSION_KEYS are the expanded writer's and the model's, named here for the callers
# that know the graph by this module.
__all__ = [
    "VERSION_KEYS",
    "WRITE_BATCH",
    "dumps",
    "from_json",
    "loads",
    "read",
    "to_compact",
    "to_json",
    "write",
    "write_text",
]


def to_compact(graph: Graph) -> dict[str, Any]:
    """The compact form of ``graph`` (version 2: columns and interned tables, docs/graph-format.md
    "Compact form"); :func:`from_json` reads it back to an equal graph. Also the form the worker
    sends the server, several times smaller to write, send and read than :func:`to_json`."""
    from jaxlsp.graph import compact_write  # when first asked: the worker's early imports skip it

    return compact_write.encode_graph(graph)


def dumps(graph: Graph, sliced: bool = False, compact: bool = False) -> str:
    """JSON text (no spaces) of ``graph``, expanded (version 1) or with ``compact`` the compact
    form (version 2); equal graphs give identical text. ``sliced``: the same text made a node at a
    time (``slices.py``: a thread doing it lets the server's event loop run)."""
    data = to_compact(graph) if compact else to_json(graph)
    if sliced:
        text = slices.dumps(data, depth=3 if compact else 2)
        slices.release(data)  # a piece at a time: freed at once, it holds the GIL (slices.release)
        return text
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def write(graph: Graph, path: str | os.PathLike[str], sliced: bool = False, compact: bool = False) -> None:
    """Write ``graph`` to ``path`` (UTF-8) atomically: readers never see half a file. ``compact``:
    the compact form (version 2), else the expanded one (version 1)."""
    write_text(dumps(graph, sliced, compact), path)


def write_text(text: str | Iterable[str], path: str | os.PathLike[str]) -> None:
    """Write a graph's text (or its pieces) to ``path`` atomically."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if isinstance(text, str):
                f.write(text)
            else:
                _write_pieces(f, text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


WRITE_BATCH = 256 * 1024  # characters joined before one write


def _write_pieces(f: TextIO, pieces: Iterable[str]) -> None:
    """Write ``pieces`` joined into writes of about :data:`WRITE_BATCH` characters.

    A write per piece (``writelines`` too) lets the GIL go and takes it back at every flush of the
    text layer (8 KiB); a thread waiting for it (the server's event loop, while a graph thread
    exports) seldom wins it in those microseconds, and CPython asks the holder to let go only when
    the GIL did not change hands for a whole switch interval, so the waiter starves: hovers waited
    up to 1.1 s behind the soak's 60,000-equation json export (issue 25). With writes of 256 KiB
    the longest wait of a thread ticking every 0.5 ms beside it went from 56-121 ms to 3 ms."""
    batch: list[str] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if size >= WRITE_BATCH:
            f.write("".join(batch))
            batch, size = [], 0
    if batch:
        f.write("".join(batch))


def from_json(data: Any) -> Graph:
    """The :class:`Graph` of a JSON form: expanded (version 1), compact (version 2, see
    :func:`to_compact`) or the packed transport of earlier workers; ``ValueError`` naming the key
    path when malformed."""
    with collector.paused():
        if isinstance(data, dict) and data.get("version") == COMPACT_VERSION and data.get("format") == FORMAT:
            from jaxlsp.graph import packed  # when first asked, as to_compact's writer

            return packed.from_compact(data)
        return read_graph(data)


def loads(text: str | bytes, sliced: bool = False) -> Graph:
    """The :class:`Graph` of a graph file's text; ``ValueError`` when it is not valid JSON or malformed.
    ``sliced``: parsed a node at a time (``slices.py``), for a thread beside the server's loop."""
    try:
        data = slices.loads(text, depth=2) if sliced else json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"<graph>: not JSON: {exc}") from None
    graph = from_json(data)
    if sliced:  # beside the loop: let go of the JSON a piece at a time (freed at once: the GIL for 0.8 s)
        slices.release(data)
    return graph


def read(path: str | os.PathLike[str]) -> Graph:
    """The :class:`Graph` saved at ``path``."""
    return loads(Path(path).read_bytes())
