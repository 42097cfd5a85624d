"""Work in steps, run through at once (no pygls here).

Discovery's long work is written as generators that yield None between pieces, so that the
server can run it a slice at a time off nothing but the event loop (``server/features/documents.py``
``sliced``); the CLI, the tests and the plain methods of the index want the result at once.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")


def run_through(steps: Generator[None, None, T]) -> T:
    """What ``steps`` returns, all of its pauses taken at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
