"""Plain data types that discovery hands to the server and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jaxlsp.discovery.ecosystem import Kind
from jaxlsp.discovery.summary import SetupField
from jaxlsp.notebook import Module


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
    factory: bool = False  # a driver that returns a function it makes (no lens: it computes nothing)
    method: bool = False  # a method asked for by name (``Term.vf``: discovery/methods.py), needs an instance

    @property
    def line(self) -> int:
        """1-based line of the ``def``/``class`` keyword."""
        return self.header.line + 1

    @property
    def end_line(self) -> int:
        """1-based last line of the body."""
        return self.body.end_line + 1

    def to_json(self, path: str | None = None, cells: Module | None = None) -> dict[str, object]:
        """The CLI's JSON item (DESIGN.md §3): ``path``, ``name``, ``kind``, ``line``, ``end_line``...

        In a notebook (``cells``, its module) ``cell`` is the index into the notebook's cells
        (markdown counted) and ``line`` / ``end_line`` count within that cell."""
        item: dict[str, object] = {"path": path if path is not None else str(self.path)}
        line, end_line = self.line, self.end_line
        if cells is not None:
            start = cells.locate(self.header.line)
            if start is not None:
                item["cell"] = start[0]
                line, end_line = start[1] + 1, self.body.end_line - (self.header.line - start[1]) + 1
        return item | {
            "name": self.name,
            "kind": self.kind,
            "line": line,
            "end_line": end_line,
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
