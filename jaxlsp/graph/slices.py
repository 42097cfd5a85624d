"""JSON of big graphs in slices, so that a thread doing it lets the event loop run (stdlib only).

``json.dumps`` and ``json.loads`` are single C calls that hold the GIL from start to end: on a
60,000-equation graph (27 MB of JSON) 0.6 s and 1.5 s in which no other thread of the server runs,
however the work is scheduled. These functions give exactly the same text and objects, but call
the C codec once per element of the big lists (a node, a value) with Python in between, where the
interpreter switches threads every few milliseconds. ``depth`` is how many levels of containers
are opened by hand; below it each element is one C call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

DEPTH = 3  # a worker's result {graph: {nodes: [node...]}}: each node is then one C call
_SPACE = re.compile(r"[ \t\n\r]*")


_ENCODERS = {
    ascii_only: json.JSONEncoder(separators=(",", ":"), ensure_ascii=ascii_only, allow_nan=False).encode
    for ascii_only in (False, True)
}


def iter_dumps(obj: Any, *, ensure_ascii: bool = False, depth: int = DEPTH) -> Iterator[str]:
    """The text of ``json.dumps(obj, separators=(",", ":"), ensure_ascii=..., allow_nan=False)``
    in pieces."""
    encode = _ENCODERS[ensure_ascii]
    if depth > 0 and isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        yield "{"
        for i, (key, value) in enumerate(obj.items()):
            yield ("," if i else "") + encode(key) + ":"
            yield from iter_dumps(value, ensure_ascii=ensure_ascii, depth=depth - 1)
        yield "}"
    elif depth > 0 and isinstance(obj, (list, tuple)):
        yield "["
        for i, value in enumerate(obj):
            if i:
                yield ","
            yield from iter_dumps(value, ensure_ascii=ensure_ascii, depth=depth - 1)
        yield "]"
    else:
        yield encode(obj)


def dumps(obj: Any, *, ensure_ascii: bool = False, depth: int = DEPTH) -> str:
    """``json.dumps(obj, separators=(",", ":"), ensure_ascii=..., allow_nan=False)``, in slices."""
    return "".join(iter_dumps(obj, ensure_ascii=ensure_ascii, depth=depth))


_DECODER = json.JSONDecoder()


def loads(text: str | bytes, depth: int = DEPTH) -> Any:
    """``json.loads(text)``, in slices; raises ``json.JSONDecodeError`` as it does."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    value, end = _value(text, _SPACE.match(text, 0).end(), depth)  # type: ignore[union-attr]  # always matches
    end = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _value(text: str, at: int, depth: int) -> tuple[Any, int]:
    opening = text[at : at + 1]
    if depth <= 0 or opening not in ("{", "["):
        return _DECODER.raw_decode(text, at)
    closing = "}" if opening == "{" else "]"
    at = _skip(text, at + 1)
    container: Any = {} if opening == "{" else []
    if text[at : at + 1] == closing:
        return container, at + 1
    while True:
        if opening == "{":
            if text[at : at + 1] != '"':
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
            key, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            if text[at : at + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
            value, at = _value(text, _skip(text, at + 1), depth - 1)
            container[key] = value
        else:
            value, at = _value(text, at, depth - 1)
            container.append(value)
        at = _skip(text, at)
        sep = text[at : at + 1]
        if sep == closing:
            return container, at + 1
        if sep != ",":
            raise json.JSONDecodeError(f"Expecting ',' delimiter or {closing!r}", text, at)
        at = _skip(text, at + 1)


def _skip(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]  # matches the empty string too


PIECE = 256  # items let go of at once by release(): a few hundred nodes, about a millisecond


def release(value: Any) -> None:
    """Let go of a big structure a piece at a time: ``value``'s own big lists (its members when it
    is a dict or an object with attributes, or itself when it is a list) are emptied
    :data:`PIECE` items at a time.

    Dropping the last reference to a 60,000-equation graph frees it in one C cascade that holds
    the GIL to its end (0.6 s measured), like ``json.loads``: in a graph thread, the event loop
    waits as long. Only the lists directly held by ``value`` are emptied, so it may be called on
    a structure whose items other objects still use (a decoded graph file whose parameters the
    graph kept); ``value`` itself must be one that nothing else holds."""
    members: Any
    if isinstance(value, list):
        members = [value]
    elif isinstance(value, dict):
        members = list(value.values())
    else:
        members = list(getattr(value, "__dict__", {}).values())
        members += [getattr(value, name, None) for name in getattr(type(value), "__slots__", ())]
    for member in members:
        if type(member) is list:
            while member:
                del member[-PIECE:]
