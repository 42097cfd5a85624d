"""Plain data types that discovery hands to the server and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jaxlsp.discovery.ecosystem import Kind
from jaxlsp.discovery.summary import SetupField


@dataclass(frozen=True, slots=True)
class Span:
    """0-based lines and code-point columns; ``end_column`` is exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column, "endLine": self.end_line, "endColumn": self.end_column}


@dataclass(frozen=True, slots=True)
class Entrypoint:
    """A JAX function or module class that can be traced."""

    path: Path
    name: str  # qualified within its file: ``MLP``, ``Outer.Inner``
    kind: Kind
    header: Span  # the def/class line, from the keyword to the end of the line
    body: Span  # the whole statement, decorators included
    decorators: tuple[str, ...]
    fields: tuple[SetupField, ...]
    reason: str  # why discovery chose it, in words (``derives flax.linen.Module``)
    driver: bool = False  # a soft-rule driver: uses JAX only incidentally

    @property
    def line(self) -> int:
        """1-based line of the ``def``/``class`` keyword."""
        return self.header.line + 1

    @property
    def end_line(self) -> int:
        """1-based last line of the body."""
        return self.body.end_line + 1

    def to_json(self, path: str | None = None) -> dict[str, object]:
        """The CLI's JSON item (DESIGN.md §3): ``path``, ``name``, ``kind``, ``line``, ``end_line``..."""
        return {
            "path": path if path is not None else str(self.path),
            "name": self.name,
            "kind": self.kind,
            "line": self.line,
            "end_line": self.end_line,
            "column": self.header.column,
            "decorators": list(self.decorators),
            "fields": [f.to_json() for f in self.fields],
            "reason": self.reason,
            "driver": self.driver,
        }


@dataclass(frozen=True, slots=True)
class Discovery:
    """What one file holds: entrypoints that get lenses, and drivers reported separately."""

    path: Path
    entrypoints: tuple[Entrypoint, ...]
    drivers: tuple[Entrypoint, ...]
