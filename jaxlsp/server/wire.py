"""The wire types of jaxlsp's LSP extensions, as TypedDicts, each method's name beside its types
(as rust-analyzer's ``lsp/ext.rs`` does).

Handlers are annotated with these types, so ``mypy --strict`` checks every answer; ``params.parse``
checks every request's params against them. docs/lsp-extensions.md documents every type here and
carries this file's hash; a test fails when this file changes without the doc.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, NotRequired, TypedDict


class Size:
    """How many characters (strings) or members (lists, objects) a param may have; checked by
    ``params.parse``, which allows 8,192 characters and 10,000 members where no Size is given."""

    def __init__(self, most: int, least: int = 0) -> None:
        self.most = most
        self.least = least


Name = Annotated[str, Size(1024, least=1)]  # a target's qualified name, a profile, a needs-input path
Dims = Annotated[dict[Name, int], Size(64)]  # sizes of symbolic dimensions, for a values run
Id = Annotated[str, Size(256, least=1)]  # trace, node, group ids and page cursors
Device = Annotated[str, Size(64)]  # cpu | cuda:N | tpu | tpu:N (protocol.DEVICE)

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
    costs: bool
    diff: bool
    values: bool  # jaxlsp/values, and values on jaxlsp/trace
    commands: list[str]


class TextDocumentIdentifier(TypedDict):
    uri: str


DISCOVER: Final = "jaxlsp/discover"


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
    range: Range  # in a notebook: within its cell
    bodyRange: Range
    decorators: list[str]
    fields: list[SetupField]
    reason: str
    cell: NotRequired[int]  # in a notebook: the index of its cell in the notebook's cells


class DiscoverTruncated(TypedDict):
    """How many items a ``jaxlsp/discover`` answer left out: the file's totals and the limit."""

    entrypoints: int  # entrypoints the file has in all
    drivers: int  # drivers the file has in all
    limit: int  # items listed at most in each list (the first ones, in file order)


class DiscoverResult(TypedDict):
    """``jaxlsp/discover`` response."""

    entrypoints: list[EntrypointItem]
    drivers: list[EntrypointItem]
    truncated: NotRequired[DiscoverTruncated]  # only when a list was cut at the limit


TRACE_GRAPH_COMMAND: Final = "jaxlsp.traceGraph"


class TraceGraphArguments(TypedDict):
    """The single argument of the ``jaxlsp.traceGraph`` command."""

    uri: str  # a file, a notebook, or a notebook cell's document
    name: Name
    profile: NotRequired[Name]
    answers: NotRequired[Annotated[dict[Name, Any], Size(256)]]
    save: NotRequired[bool]
    costs: NotRequired[bool]  # measure XLA's costs of every equation (jaxlsp/costs)
    cell: NotRequired[int]  # a notebook's cell whose definition is meant (default: the last one)
    example: NotRequired[Annotated[str, Size(4096, least=1)]]
    values: NotRequired[bool]  # also run the graph on the profile's inputs ("Trace with values")
    dims: NotRequired[Dims]
    compiled: NotRequired[bool]  # also compile for the profile's devices ("Trace compiled")
    time: NotRequired[bool]  # also run the compiled program under the profiler (measured time)
    repeat: NotRequired[int]  # with time: the runs profiled after a warm-up (1 to 1000, default 5)


TRACE_WITH_VALUES_COMMAND: Final = "jaxlsp.traceWithValues"
"""The "Trace with values" lens and code action: ``jaxlsp.traceGraph``'s argument, run with
``values`` (its own name, so that clients which run ``jaxlsp.traceGraph`` themselves pass it on)."""

TRACE_COMPILED_COMMAND: Final = "jaxlsp.traceCompiled"
"""The "Trace compiled" code action: ``jaxlsp.traceGraph``'s argument, run with ``compiled``
(the collectives XLA inserted, by line and module; fusions; per-device costs and memory)."""

OPEN_GRAPH_COMMAND: Final = "jaxlsp.openGraph"


class OpenGraphArguments(TypedDict):
    """The single argument of the ``jaxlsp.openGraph`` command (the "Open graph" lens, and the
    code action on a non-finite value's diagnostic, which selects its node)."""

    traceId: Id
    nodeId: NotRequired[Id]


TRACE: Final = "jaxlsp/trace"


class TraceParams(TypedDict):
    """``jaxlsp/trace`` request params."""

    textDocument: TextDocumentIdentifier
    name: Name
    profile: NotRequired[Name]
    answers: NotRequired[Annotated[dict[Name, Any], Size(256)]]  # needs-input item path -> the typed text
    save: NotRequired[bool]  # write the completed profile to jaxlsp.toml
    costs: NotRequired[bool]  # measure XLA's costs of every equation (jaxlsp/costs)
    cell: NotRequired[int]  # a notebook's cell whose definition is meant (default: the last one)
    # an example to run up to the target's first call, to learn its inputs: "PATH[::TEST] [ARGS]"
    # relative to the workspace folder (a needs-input answer's examples[].example)
    example: NotRequired[Annotated[str, Size(4096, least=1)]]
    values: NotRequired[bool]  # also run the graph on the profile's inputs: statistics on every value
    # also compile for the profile's devices and read what XLA made of it (collectives, fusions,
    # per-device shapes, costs and memory): the result's ``compiled``
    compiled: NotRequired[bool]
    dims: NotRequired[Dims]  # sizes of the profile's symbolic dimensions (a values or timed run needs them)
    # also compile the program and run it on the profile's inputs under jax.profiler: the graph's
    # measured time per node, line and module (docs/graph-format.md "Time"); implies costs
    time: NotRequired[bool]
    repeat: NotRequired[int]  # with time: the runs profiled after a warm-up (1 to 1000, default 5)


class TraceSummary(TypedDict):
    ops: int
    values: int
    groups: int
    parameters: int
    outputs: list[str]


class TraceCoverage(TypedDict):
    complete: bool
    notes: list[str]


class FirstNonFinite(TypedDict):
    """The first equation whose inputs are finite and whose output is not."""

    nodeId: str
    valueId: str
    primitive: str
    kind: str  # nan | inf | -inf | inf/-inf
    message: str  # "first non-finite (-inf): log at nan.py:8, scan iteration 4, input min 0.0"
    location: NotRequired[Location]


class ValuesSummary(TypedDict):
    """What a values run found (``jaxlsp/trace`` with ``values``)."""

    values: int  # values with statistics
    seconds: float
    validation: Literal["verified", "partial", "mismatch"]
    mismatch: NotRequired[str]  # the first diverging output, in words
    firstNonFinite: NotRequired[FirstNonFinite]
    zeroGradients: NotRequired[list[str]]  # gradient profiles: parameters whose gradient is all zero


class CollectiveGroup(TypedDict):
    """The collectives of one kind that one module's line caused."""

    kind: str  # all-reduce | all-gather | reduce-scatter | all-to-all | collective-permute | ...
    where: str  # "model.py:8" (relative, as the graph's paths), "" when unknown
    scope: str  # the module path, "" outside modules
    count: int
    bytes: int  # their results' bytes on one device


class CompiledModuleRow(TypedDict):
    """One module of the compiled program, on one device (FLOPs and bytes estimated)."""

    scope: str
    flops: int
    bytes: int
    collectiveBytes: int
    collectives: int


class CompiledSummary(TypedDict):
    """What XLA made of the program (``jaxlsp/trace`` with ``compiled``)."""

    collectives: str  # the line "collectives: all-reduce ... at model.py:8 Dense_0; ..." or "collectives: none"
    text: list[str]  # the lines ``jaxlsp trace --compiled`` prints
    error: NotRequired[str]  # lowering or compiling failed (the graph stands)
    groups: NotRequired[list[CollectiveGroup]]
    modules: NotRequired[list[CompiledModuleRow]]
    peakBytes: NotRequired[int]  # the compiled schedule's peak on one device
    devices: NotRequired[int]


class TimeModule(TypedDict):
    module: str  # a module path ("" outside every module)
    seconds: float  # per step


class TimeSummary(TypedDict):
    """What a timed run measured (``jaxlsp/trace`` with ``time``); the graph's ``time`` has it all."""

    step: float  # seconds: one run's wall-clock time, the mean of the profiled runs
    busy: float  # seconds per step the device ran the program's ops
    attributed: float  # of busy, the seconds attributed to graph nodes
    repeat: int
    device: str
    modules: list[TimeModule]  # the table's rows (they add up to the step), largest first


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
    inputsFrom: NotRequired[str]  # "tests/test_models.py:25 (test)": the call site the inputs came from
    values: NotRequired[ValuesSummary]  # with ``values``: what the run found
    compiled: NotRequired[CompiledSummary]  # with ``compiled``: what XLA made of the program
    time: NotRequired[TimeSummary]  # with ``time``: what the profiled runs measured
    replayed: NotRequired[int]  # Linen module calls traced once and replayed (worker/reuse/replay.py)


class ExampleChoice(TypedDict):
    """A runnable example that reaches the target: trace again with this ``example``."""

    example: str  # "tests/test_models.py::test_resnet", "train.py", relative to the project root
    kind: Literal["test", "script", "module"]
    path: str  # "tests/test_models.py:25": where it uses the target, relative to the project root
    static: bool  # its values are partly known without running it
    via: NotRequired[str]  # how it reaches the target: "through ResNet (passed to it at models.py:63)"


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
    examples: NotRequired[list[ExampleChoice]]  # runnable examples, best first (only when some exist)


TRACE_FINISHED: Final = "jaxlsp/traceFinished"


class TraceFinished(TypedDict):
    """The ``jaxlsp/traceFinished`` notification."""

    uri: str
    name: str
    ok: bool
    traceId: NotRequired[str]
    error: NotRequired[str]


LIVE_STATUS: Final = "jaxlsp/liveStatus"


class LiveTarget(TypedDict):
    """One target of ``jaxlsp/liveStatus``: ``fresh`` (its newest graph is of the saved text),
    ``queued``, ``tracing``, ``failed`` (``reason``: the cause) or ``notLive`` (``reason``: why)."""

    uri: str
    name: str
    state: Literal["fresh", "queued", "tracing", "failed", "notLive"]
    reason: NotRequired[str]
    traceId: NotRequired[str]  # its newest graph from a live or explicit trace
    waiting: NotRequired[bool]  # failed twice with the same cause: waits for its files to change


class LiveStatus(TypedDict):
    """The ``jaxlsp/liveStatus`` notification: every live target, sent when one changes."""

    enabled: bool
    targets: list[LiveTarget]
    started: int  # live traces started in this session


GRAPH: Final = "jaxlsp/graph"


class GraphParams(TypedDict):
    traceId: Id
    group: NotRequired[Id]
    cursor: NotRequired[Id]
    limit: NotRequired[int]


class ValueRef(TypedDict):
    id: str
    shape: list[int | str]
    dtype: str
    weakType: bool
    type: str
    stats: NotRequired[dict[str, Any]]  # a values run's statistics (docs/graph-format.md)


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


NODE: Final = "jaxlsp/node"


class NodeParams(TypedDict):
    traceId: Id
    nodeId: Id


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


VALUES: Final = "jaxlsp/values"


class ValuesParams(TypedDict):
    """``jaxlsp/values`` request params: statistics (and small arrays) of an existing trace's
    values; the trace's target runs again with values when the trace has none yet."""

    traceId: Id
    values: NotRequired[Annotated[list[Id], Size(4096)]]  # value ids
    nodes: NotRequired[Annotated[list[Id], Size(4096)]]  # node ids: their inputs and outputs
    inline: NotRequired[bool]  # also the arrays of those values (at most 4,096 elements each)
    dims: NotRequired[Dims]


class InlineArray(TypedDict):
    shape: list[int]
    dtype: str
    data: NotRequired[Any]  # nested lists; non-finite numbers as {"float": "nan" | "inf" | "-inf"}
    omitted: NotRequired[str]  # why the data is not here (too large, not numeric)
    error: NotRequired[str]  # the value was not computed (a branch not taken)


class GradientNorm(TypedDict):
    module: str  # "" for the whole model
    norm: float
    parameters: int
    zero: int


class Gradients(TypedDict):
    parameters: list[dict[str, Any]]  # {label, value, norm, zero, size}
    modules: list[GradientNorm]
    zero: list[str]


class ValuesResult(TypedDict):
    """``jaxlsp/values`` response."""

    traceId: str
    seconds: float
    validation: dict[str, Any]  # {status, outputs, maxAbsError, maxRelError, mismatch?, partial?}
    executed: dict[str, int]  # group id -> times run (a taken cond branch, a loop body's iterations)
    stats: dict[str, dict[str, Any] | None]  # value id -> statistics; null when not computed
    firstNonFinite: NotRequired[FirstNonFinite]
    gradients: NotRequired[Gradients]
    arrays: NotRequired[dict[str, InlineArray]]


NODES_AT: Final = "jaxlsp/nodesAt"


class NodesAtParams(TypedDict):
    textDocument: TextDocumentIdentifier
    position: Position


class NodesAtResult(TypedDict):
    traceId: str | None
    nodeIds: list[str]


EXPORT: Final = "jaxlsp/export"


class ExportParams(TypedDict):
    traceId: Id
    format: NotRequired[Literal["json", "dot", "html"]]


class ExportResult(TypedDict):
    uri: str


REVEAL_SOURCE: Final = "jaxlsp/revealSource"


class RevealSourceParams(TypedDict):
    traceId: Id
    nodeId: Id
    frame: NotRequired[int]


class RevealSourceResult(TypedDict):
    location: Location


OPEN_GRAPH: Final = "jaxlsp/openGraph"


class OpenGraphParams(TypedDict):
    traceId: Id
    nodeId: NotRequired[Id]  # the node the page selects and reveals


class OpenGraphResult(TypedDict):
    url: str


CURSOR_MOVED: Final = "jaxlsp/cursorMoved"


class CursorMovedParams(TypedDict):
    """The ``jaxlsp/cursorMoved`` notification (client to server; no answer)."""

    textDocument: TextDocumentIdentifier
    position: Position


ENVIRONMENT: Final = "jaxlsp/environment"


class EnvironmentParams(TypedDict):
    """``jaxlsp/environment`` request params (all optional); also the ``jaxlsp.checkEnvironment``
    command's single optional argument, with ``uri`` for ``textDocument``."""

    textDocument: NotRequired[TextDocumentIdentifier]
    name: NotRequired[Name]
    device: NotRequired[Device]
    refresh: NotRequired[bool]


CHECK_ENVIRONMENT_COMMAND: Final = "jaxlsp.checkEnvironment"


class CheckEnvironmentArguments(TypedDict):
    """The ``jaxlsp.checkEnvironment`` command's single optional argument."""

    uri: NotRequired[str]
    name: NotRequired[Name]
    device: NotRequired[Device]


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


COSTS: Final = "jaxlsp/costs"


class CostsParams(TypedDict):
    """``jaxlsp/costs`` request params."""

    traceId: Id
    limit: NotRequired[int]  # modules in the answer, largest first (default 200, at most 5,000)


class CostFigures(TypedDict):
    flops: int
    bytes: int
    transcendentals: int


class ModuleCosts(TypedDict):
    scope: str  # "" is what lies outside every module
    params: int
    paramBytes: int
    flops: int
    bytes: int
    transcendentals: int
    share: float  # of the program's FLOPs
    forward: CostFigures
    backward: CostFigures
    ops: int


class ModuleBytes(TypedDict):
    scope: str
    bytes: int


class MemoryPeak(TypedDict):
    peakBytes: int
    node: str | None
    live: list[str]
    byModule: list[ModuleBytes]
    inputBytes: int
    unsized: int


class ModuleResiduals(TypedDict):
    scope: str
    bytes: int
    count: int


class ResidualsInfo(TypedDict):
    values: list[str]
    bytes: int
    byModule: list[ModuleResiduals]
    inputBytes: int
    recomputedOps: int
    recomputedFlops: int | None


class PrecisionRow(TypedDict):
    scope: str
    conversions: dict[str, int]
    products: dict[str, int]
    nodes: list[str]


class CostsResult(TypedDict):
    """``jaxlsp/costs`` response."""

    traceId: str
    measured: bool  # the trace carries XLA's figures (traced with costs)
    gradient: bool
    total: CostFigures
    bodyOnce: CostFigures
    unknown: int
    modules: list[ModuleCosts]
    notes: list[str]
    measurement: dict[str, Any] | None
    memory: MemoryPeak
    residuals: ResidualsInfo | None
    precision: list[PrecisionRow]
    text: str


DIFF: Final = "jaxlsp/diff"


class DiffParams(TypedDict):
    """``jaxlsp/diff`` request params: the newer graph (a trace or a graph file) and the older one
    (a trace or a file; neither: the trace before ``traceId`` of the same target)."""

    traceId: NotRequired[Id]
    uri: NotRequired[str]
    base: NotRequired[Id]
    baseUri: NotRequired[str]
    limit: NotRequired[int]  # nodes listed per kind of change (default 1,000)


class DiffNode(TypedDict):
    id: str
    primitive: str
    scope: str


class DiffField(TypedDict):
    field: str
    before: str
    after: str


class DiffChange(TypedDict):
    id: str
    baseId: str
    primitive: str
    scope: str
    fields: list[DiffField]
    text: str


class DiffPort(TypedDict):
    label: str
    before: str | None
    after: str | None


class DiffCounts(TypedDict):
    added: int
    removed: int
    changed: int
    matched: int


class DiffResult(TypedDict):
    """``jaxlsp/diff`` response."""

    same: bool
    summary: str
    counts: DiffCounts
    added: list[DiffNode]
    removed: list[DiffNode]
    changed: list[DiffChange]
    inputs: list[DiffPort]
    outputs: list[DiffPort]
    truncated: bool
    traceId: str | None  # the newer trace (None for a file)
    base: str  # the older: a trace id or a file URI


class LensData(TypedDict):
    """``CodeLens.data`` between ``textDocument/codeLens`` and ``codeLens/resolve``."""

    uri: str
    name: str
    kind: EntrypointKind


LIST_TRUSTED_COMMAND: Final = "jaxlsp.listTrusted"  # no argument; the folders trusted "Always"
REVOKE_TRUST_COMMAND: Final = "jaxlsp.revokeTrust"  # one argument, a folder; true when it was trusted


LEARN_SHAPES_COMMAND: Final = "jaxlsp.learnShapes"


class LearnShapesArguments(TypedDict):
    """The ``jaxlsp.learnShapes`` command's single optional argument: a folder whose tests (and the
    scripts the docs run) are run, or a file: the examples whose imports reach it; absent: the
    workspace folder. ``budget``: seconds the whole run may take (default 900)."""

    uri: NotRequired[str]
    budget: NotRequired[float]


class LearnedExample(TypedDict):
    text: str  # the example as the user would type it ("tests/test_model.py", "train.py --steps 1")
    outcome: Literal["finished", "stopped", "failed", "exited", "timeout", "error", "cached"]
    message: str
    learned: int  # signatures it recorded
    seconds: float


class LearnShapesResult(TypedDict):
    """``jaxlsp.learnShapes`` response: what was learned, from which examples, what failed."""

    learned: int  # targets with a learned call now
    targets: list[str]  # "path::Name", relative to the folder
    examples: list[LearnedExample]
    failures: list[str]  # one line each: "EXAMPLE: cause"
    ran: int  # examples run
    cached: int  # examples not run: nothing they load changed since they taught what is kept
    seconds: float
    stopped: NotRequired[Literal["cancelled", "out of time"]]
