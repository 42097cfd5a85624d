"""The wire types of jaxlsp's LSP extensions, as TypedDicts.

docs/lsp-extensions.md documents every type here and carries this file's hash; a test fails
when this file changes without the doc.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

EntrypointKind = Literal["function", "linen", "nnx", "equinox"]
FieldKind = Literal["field", "positionalOnly", "positional", "varPositional", "keywordOnly", "varKeyword"]


class Position(TypedDict):
    line: int
    character: int


class Range(TypedDict):
    start: Position
    end: Position


class ExperimentalCapabilities(TypedDict):
    """``ServerCapabilities.experimental.jaxlsp``."""

    version: int
    discover: bool
    traceGraph: bool
    commands: list[str]


class TextDocumentIdentifier(TypedDict):
    uri: str


class DiscoverParams(TypedDict):
    """``jaxlsp/discover`` request params."""

    textDocument: TextDocumentIdentifier


class SetupField(TypedDict):
    name: str
    annotation: str | None
    default: str | None
    kind: FieldKind


class EntrypointItem(TypedDict):
    name: str
    kind: EntrypointKind
    range: Range
    bodyRange: Range
    decorators: list[str]
    fields: list[SetupField]
    reason: str


class DiscoverResult(TypedDict):
    """``jaxlsp/discover`` response."""

    entrypoints: list[EntrypointItem]
    drivers: list[EntrypointItem]


class TraceGraphArguments(TypedDict):
    """The single argument of the ``jaxlsp.traceGraph`` command."""

    uri: str
    name: str
    profile: NotRequired[str]


class LensData(TypedDict):
    """``CodeLens.data`` between ``textDocument/codeLens`` and ``codeLens/resolve``."""

    uri: str
    name: str
    kind: EntrypointKind
