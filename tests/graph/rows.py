"""Counting the graph model objects a piece of code makes (tests of the paths that must not)."""

from __future__ import annotations

from typing import Any

import pytest

from jaxlsp.graph.model import Node, Value


def count_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the class name of every ``Node`` and ``Value`` made, in order."""
    made: list[str] = []
    for cls in (Node, Value):
        plain = cls.__init__

        def counted(self: Any, *args: Any, _plain: Any = plain, _name: str = cls.__name__, **kw: Any) -> None:
            made.append(_name)
            _plain(self, *args, **kw)

        monkeypatch.setattr(cls, "__init__", counted)
    return made
