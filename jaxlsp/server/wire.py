"""The wire types of jaxlsp's LSP extensions, as TypedDicts.

docs/lsp-extensions.md documents every type here and carries this file's hash; a test fails
when this file changes without the doc.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

EntrypointKind = Literal["function", "linen", "nnx", "equinox"]
FieldKind = Literal["field", "positionalOnly", "positional", "varPositional", "keywordOnly", "varKeyword"]


class Position(TypedDict):
    line: int
    character: int


class Range(TypedDict):
    start: Position
    end: Position


class ClientExperimentalCapabilities(TypedDict):
    """``ClientCapabilities.experimental.jaxlsp``: the client's opt-ins."""

    openGraph: NotRequired[bool]  # the client opens jaxlsp/openGraph's url itself (no showDocument)


class ExperimentalCapabilities(TypedDict):
    """``ServerCapabilities.experimental.jaxlsp``."""

    version: int
    discover: bool
    traceGraph: bool
    environment: bool
    openGraph: bool
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
    answers: NotRequired[dict[str, Any]]
    save: NotRequired[bool]


class OpenGraphArguments(TypedDict):
    """The single argument of the ``jaxlsp.openGraph`` command (the "Open graph" lens)."""

    traceId: str


class TraceParams(TypedDict):
    """``jaxlsp/trace`` request params."""

    textDocument: TextDocumentIdentifier
    name: str
    profile: NotRequired[str]
    answers: NotRequired[dict[str, Any]]  # needs-input item path -> the typed text (parsed by the server)
    save: NotRequired[bool]  # write the completed profile to jaxlsp.toml


class TraceSummary(TypedDict):
    ops: int
    values: int
    groups: int
    parameters: int
    outputs: list[str]


class TraceCoverage(TypedDict):
    complete: bool
    notes: list[str]


class TraceResult(TypedDict):
    """``jaxlsp/trace`` response (and ``jaxlsp.traceGraph``'s) when a graph was made."""

    traceId: str
    summary: TraceSummary
    coverage: TraceCoverage
    freshness: str
    interpreter: str
    interpreterRoute: str
    profile: str | None
    saved: NotRequired[str]  # the jaxlsp.toml URI the profile was written to


class NeedsInputItem(TypedDict):
    """One missing piece of a profile (docs/recipes.md, "Needs input")."""

    path: str  # the key path to answer: profiles.mlp.dims.batch
    kind: Literal["dimension", "shape", "value", "inputs"]
    message: str
    name: NotRequired[str]  # a dimension's name
    usedAt: NotRequired[list[str]]  # where that dimension is used
    param: NotRequired[str]  # a proposal's parameter
    annotation: NotRequired[str | None]


class NeedsInputResult(TypedDict):
    """``jaxlsp/trace`` response when the profile lacks inputs."""

    needsInput: list[NeedsInputItem]
    proposal: str  # the profile to complete, as TOML text
    profile: str  # its name
    errors: NotRequired[dict[str, str]]  # answers that did not parse or check: path -> message


class TraceFinished(TypedDict):
    """The ``jaxlsp/traceFinished`` notification."""

    uri: str
    name: str
    ok: bool
    traceId: NotRequired[str]
    error: NotRequired[str]


class GraphParams(TypedDict):
    traceId: str
    group: NotRequired[str]
    cursor: NotRequired[str]
    limit: NotRequired[int]


class ValueRef(TypedDict):
    id: str
    shape: list[int | str]
    dtype: str
    weakType: bool
    type: str


class NodeItem(TypedDict):
    id: str
    kind: Literal["node"]
    primitive: str
    scope: str
    outputs: list[ValueRef]
    source: NotRequired[dict[str, Any]]


class GroupCounts(TypedDict):
    nodes: int
    groups: int


class GroupItem(TypedDict):
    id: str
    kind: Literal["group"]
    groupKind: str
    label: str
    counts: GroupCounts


class GraphPage(TypedDict):
    items: list[NodeItem | GroupItem]
    nextCursor: NotRequired[str]


class NodeParams(TypedDict):
    traceId: str
    nodeId: str


class Location(TypedDict):
    uri: str
    range: Range


class NodeDetail(TypedDict):
    id: str
    kind: Literal["node"]
    primitive: str
    params: dict[str, Any]
    inputs: list[ValueRef]
    outputs: list[ValueRef]
    scope: str
    group: str | None
    transforms: list[str]
    frames: list[Location]


class NodesAtParams(TypedDict):
    textDocument: TextDocumentIdentifier
    position: Position


class NodesAtResult(TypedDict):
    traceId: str | None
    nodeIds: list[str]


class ExportParams(TypedDict):
    traceId: str
    format: Literal["json", "dot", "html"]


class ExportResult(TypedDict):
    uri: str


class RevealSourceParams(TypedDict):
    traceId: str
    nodeId: str
    frame: NotRequired[int]


class RevealSourceResult(TypedDict):
    location: Location


class OpenGraphParams(TypedDict):
    traceId: str


class OpenGraphResult(TypedDict):
    url: str


class CursorMovedParams(TypedDict):
    """The ``jaxlsp/cursorMoved`` notification (client to server; no answer)."""

    textDocument: TextDocumentIdentifier
    position: Position


class EnvironmentParams(TypedDict):
    """``jaxlsp/environment`` request params (all optional); also the ``jaxlsp.checkEnvironment``
    command's single optional argument, with ``uri`` for ``textDocument``."""

    textDocument: NotRequired[TextDocumentIdentifier]
    name: NotRequired[str]
    device: NotRequired[str]
    refresh: NotRequired[bool]


class EnvironmentProblem(TypedDict):
    severity: Literal["error", "warning"]
    message: str
    fix: str
    package: NotRequired[str]
    requirement: NotRequired[str]


class EnvironmentResult(TypedDict):
    """``jaxlsp/environment`` response (and ``jaxlsp.checkEnvironment``'s)."""

    python: str
    route: str
    ok: bool
    pythonVersion: str | None
    packages: dict[str, str | None]
    backends: list[str]
    plugins: list[str]
    device: str
    needs: list[str]
    problems: list[EnvironmentProblem]
    message: str
    cached: bool
    install: NotRequired[str]
    installed: NotRequired[bool]


class LensData(TypedDict):
    """``CodeLens.data`` between ``textDocument/codeLens`` and ``codeLens/resolve``."""

    uri: str
    name: str
    kind: EntrypointKind
