"""Big answers written as JSON in slices, so that the requests behind them are answered meanwhile.

pygls turns a handler's result into JSON in one piece on the event loop (cattrs' ``unstructure``
over every item, then ``json.dumps`` of the whole): for the 2,001 lenses of a 25,000-function file
that held every other request 0.15-0.34 s (issue 25, measured with the loop watchdog,
``jaxlsp/server/loopwatch.py``). A handler that may answer many items returns :class:`Encoded`
instead, made by :func:`encode_list` or :func:`encode_members`: each item is converted and encoded
on its own, and the loop runs other requests every :data:`BATCH` items. ``JaxProtocol`` sends an
``Encoded`` result as it is; the text is what pygls would have sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")
# Items encoded between two chances for other requests: a lens is about 20 us of cattrs and json,
# so a batch is a few milliseconds even on a busy machine. Counted, not timed, so that a hover sent
# right behind a big answer is answered before it on any machine.
BATCH = 100


class Encoded:
    """A result already written as JSON text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Encoded({len(self.text):,} characters)"


def plain(value: Any) -> Any:
    """JSON-ready data as it is (the conversion of items that are plain dicts already)."""
    return value


async def encoded_items(items: Iterable[T], convert: Callable[[T], Any]) -> str:
    """The JSON array of ``items``, each converted by ``convert`` (``converter.unstructure`` for
    lsprotocol types, :func:`plain` for dicts), yielding to the loop every :data:`BATCH` items."""
    parts: list[str] = []
    for count, item in enumerate(items, 1):
        parts.append(json.dumps(convert(item)))
        if count % BATCH == 0:
            await asyncio.sleep(0)
    return "[" + ",".join(parts) + "]"


async def encode_list(items: Iterable[T], convert: Callable[[T], Any]) -> Encoded:
    """``items`` as an :class:`Encoded` JSON array (see :func:`encoded_items`)."""
    return Encoded(await encoded_items(items, convert))


async def encode_members(members: Mapping[str, Any]) -> Encoded:
    """An object whose list members are encoded item by item (see :func:`encoded_items`); its other
    members are plain JSON data."""
    parts = []
    for key, value in members.items():
        text = await encoded_items(value, plain) if isinstance(value, list) else json.dumps(value)
        parts.append(f"{json.dumps(key)}: {text}")
    return Encoded("{" + ", ".join(parts) + "}")
