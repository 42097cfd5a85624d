"""What the capture client sends the worker and what comes back: JSON-able TypedDicts, stdlib only.

The client writes one ``WorkerRequest`` as JSON to the worker's stdin and reads one
``WorkerResult`` as JSON from a private pipe (fd given in ``WorkerRequest.resultFd``); whatever
the user's code prints goes to stdout/stderr and comes back as logs, never into the result. Ahead
of the result the pipe may carry progress lines, each starting with ``#`` (JSON never does):
``#phase NAME`` when a phase starts, and, in a learning run, ``#learned [records]``, the signature
records made since the last such line (the result's ``signatures`` holds them all again).

Input specs arrive validated and resolved by :mod:`jaxlsp.recipes` (named dimensions replaced
by their sizes, missing seeds filled with the profile's): the worker only builds them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypedDict

if TYPE_CHECKING:
    from typing import NotRequired  # Python 3.11: the worker also runs on 3.10

#: A JSON value as the worker writes one (``json.dumps`` takes it): read-only containers, so that a
#: ``list[str]`` or a ``dict[str, int]`` is one too.
Json: TypeAlias = "bool | int | float | str | Sequence[Json] | Mapping[str, Json] | None"

TargetKind = Literal["function", "linen", "nnx", "equinox"]


class ErrorKind(str, enum.Enum):  # noqa: UP042 (the worker runs on Python 3.10: no StrEnum)
    """What failed, as the result's ``error.kind`` says it: the client, the CLI's exit status and
    the server's diagnostics go by this, never by a failure's text. A ``str`` enum: the JSON is the
    same strings, and a kind read back from JSON compares equal to its member."""

    IMPORT = "import"  # loading the target's file (or what it imports) failed
    TRACE = "trace"  # make_jaxpr of the target failed
    TIMEOUT = "timeout"
    CRASH = "crash"  # the worker died without a result
    MEMORY = "memory"  # the worker's memory cap
    REFUSED = "refused"  # what the request asks cannot be done (a recipe problem, a limit)
    NEEDS_INPUT = "needs_input"  # the profile lacks values the user must give
    INTERNAL = "internal"  # a bug of jaxlsp's
    EXAMPLE = "example"  # an example run ended or failed without calling the target

    def __str__(self) -> str:  # in f-strings and messages: the wire spelling, not ``ErrorKind.TRACE``
        return str(self.value)


#: A kind spelled as the worker's raise sites write it (``CaptureError("import", ...)``): the same
#: names as :class:`ErrorKind`, checked by mypy, made a member where the failure is built.
ErrorKindName = Literal[
    "import", "trace", "timeout", "crash", "memory", "refused", "needs_input", "internal", "example"
]  # fmt: skip

#: The devices a profile, ``--device`` and the server's ``device`` setting may name: ``cpu``,
#: ``cuda:N``, ``tpu`` (the first TPU) and ``tpu:N``. The recipes, the environment check and
#: the worker read this one spelling, so a device one accepts is never unknown to another.
DEVICE: Final = re.compile(r"cpu|cuda:(0|[1-9][0-9]*)|tpu(:(0|[1-9][0-9]*))?")
DEVICE_CHOICES: Final = '"cpu", "cuda:N", "tpu" or "tpu:N"'


def device_platform(device: str) -> tuple[str, int] | None:
    """``(platform, index)`` of a device spelled as :data:`DEVICE` allows (``tpu`` is ``tpu:0``;
    the CPU's index is 0), else None."""
    if not DEVICE.fullmatch(device):
        return None
    platform, _, index = device.partition(":")
    return platform, int(index or 0)


#: Graph-size limits (worker/tracing/limits.py checks them): a target over one is refused with its
#: figures, never truncated.
# What the compact form makes cheap (docs/graph-format.md "What a large graph costs", measured on
# a lax.sin chain and benchmarks/models/scale_lm.py's decoder): at 500,000 equations the file is
# 15-45 MB, the server holds 89-245 MB and every process of the trace stays near 3 GB or less; at a
# million the worker peaks at 5.8 GB (of its 8 GiB cap), receiving peaks at 2.5 GB in the server and
# a flat program's pages and hovers take p50 25-76 ms. ``bytes`` is the compact result's.
DEFAULT_LIMITS = {"equations": 500_000, "values": 1_000_000, "bytes": 256 * 1024 * 1024}
# Where each limit is raised: the server setting and the CLI flag.
LIMIT_SETTINGS = {
    "equations": ("jaxlsp.limits.equations", "--max-equations"),
    "values": ("jaxlsp.limits.values", "--max-values"),
    "bytes": ("jaxlsp.limits.bytes", "--max-bytes"),
}


def resolve_limits(raw: object) -> dict[str, int]:
    """The defaults, with each positive integer of ``raw`` in their place."""
    out = dict(DEFAULT_LIMITS)
    if isinstance(raw, dict):
        for key in DEFAULT_LIMITS:
            value = raw.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                out[key] = value
    return out


#: A warm spare's refusal that names no module: priming failed, so no spare of this interpreter is
#: sent primes again (worker/process/forkserver.py).
NO_PRIMES: Final = "(priming)"


class Generator(TypedDict):
    """``{kind: full, value}`` | ``zeros`` | ``ones`` | ``normal (seed, mean, std)`` |
    ``uniform (seed, low, high)`` | ``arange (start, step)`` | ``randint (low, high, seed)``."""

    kind: Literal["full", "zeros", "ones", "normal", "uniform", "arange", "randint"]
    value: NotRequired[float | int | bool]
    seed: NotRequired[int]
    mean: NotRequired[float]
    std: NotRequired[float]
    low: NotRequired[float | int]
    high: NotRequired[float | int]
    start: NotRequired[float | int]
    step: NotRequired[float | int]


class ArraySpec(TypedDict):
    kind: Literal["array"]
    shape: list[int | str]  # a str only for a dimension traced symbolically (see ``symbolic``)
    dtype: str  # recipes/schema.py DTYPES: float16 ... float64, int8 ... int64, uint8 ... uint64, bool, complex64/128
    generator: Generator
    # per dimension, the profile's mesh axes it is split over (None: not split), as the graph
    # spells a sharding; absent: not sharded
    sharding: NotRequired[list[list[str] | None]]


AxisType = Literal["Explicit", "Auto"]


class MeshSpec(TypedDict):
    """The profile's device mesh (``jax.make_mesh``), spelled as the graph's ``mesh``."""

    axisNames: list[str]
    axisSizes: list[int]
    axisTypes: list[AxisType]


class KeySpec(TypedDict):
    """A typed PRNG key (``key<fry>``; ``impl`` names another implementation: ``rbg``,
    ``unsafe_rbg``, ``threefry2x32``), or with ``legacy`` a raw ``uint32[2]`` key."""

    kind: Literal["key"]
    seed: int
    impl: NotRequired[str]
    legacy: NotRequired[bool]


class NoneSpec(TypedDict):
    kind: Literal["none"]


class RefSpec(TypedDict):
    """A Python object by reference (``module:Name``, ``Name`` may be dotted), called when
    ``args``/``kwargs`` are given."""

    kind: Literal["ref"]
    ref: str
    args: NotRequired[list[InputSpec]]
    kwargs: NotRequired[dict[str, InputSpec]]


class StaticSpec(TypedDict):
    """A Python scalar or string: passed as is, static for tracing."""

    kind: Literal["static"]
    value: int | float | bool | str


class ListSpec(TypedDict):
    kind: Literal["list"]
    items: list[InputSpec]


class DictSpec(TypedDict):
    kind: Literal["dict"]
    items: dict[str, InputSpec]


#: One input's spec, told apart by its ``kind``.
InputSpec: TypeAlias = "ArraySpec | KeySpec | NoneSpec | RefSpec | StaticSpec | ListSpec | DictSpec"


class CallSpec(TypedDict):
    """Positional and keyword arguments, or a factory ``module:function`` called with none."""

    args: NotRequired[list[InputSpec]]
    kwargs: NotRequired[dict[str, InputSpec]]
    factory: NotRequired[str]


class Target(TypedDict):
    path: str  # absolute path of the target's file (the graph spells it relative: worker/core/paths.py)
    name: str  # "MLP", "Outer.Inner", "Class.method"
    kind: NotRequired[TargetKind]  # absent: inferred in the worker (a plain callable is a function)
    # a notebook target: the cell (index in its cells) whose definition is meant; absent: the
    # last code cell that defines the name
    cell: NotRequired[int]


class ExampleSpec(TypedDict):
    """One of the workspace's own examples, run up to the target's first call (worker/examples/firstcall.py)."""

    kind: Literal["test", "script", "module"]
    path: str  # absolute: the test file (or folder), the script, the module's file
    text: str  # as the user wrote it, relative to the root: "tests/test_m.py::test_x", "train.py --steps 1"
    tests: NotRequired[list[str]]  # pytest node ids, relative to the root (a test example)
    argv: NotRequired[list[str]]  # the script's arguments


class ResolvedProfile(TypedDict):
    """A validated profile with everything the worker needs; what the graph records as ``profile``."""

    name: str | None  # the profile's name in jaxlsp.toml, None for a proposed or CLI-made one
    device: str  # "cpu" | "cuda:N" | "tpu" | "tpu:N" (DEVICE)
    devices: NotRequired[int]  # N virtual CPU devices (pmap, shard_map, meshes); CPU only
    mesh: NotRequired[MeshSpec]  # the inputs' shardings name its axes; traced under jax.set_mesh
    topology: NotRequired[str]  # a TPU pod ("v5e:16x16") compiled for; the mesh is over its devices
    seed: int
    x64: bool
    init: NotRequired[CallSpec]  # constructor / Linen init arguments (module targets)
    inputs: CallSpec  # call arguments
    transform: NotRequired[Literal["grad", "value_and_grad"]]
    rngs: NotRequired[list[str]]  # extra Linen rng streams, seeded from ``seed``
    mutable: NotRequired[list[str] | bool]  # Linen mutable collections; True: all of them, as init does
    method: NotRequired[str]  # a method other than __call__
    # module: import the file; definitions: only its definitions; cells (notebooks): the code
    # cells above the target's run in order, the target's own cell as definitions
    load: Literal["module", "definitions", "cells"]
    symbolic: NotRequired[list[str]]  # dimension names traced symbolically (one shared scope)
    env: NotRequired[list[str]]  # environment variables passed to the capture (names only)
    example: NotRequired[ExampleSpec]  # learn the call from this example's run (inputs are then unused)


class CostOptions(TypedDict):
    cacheDir: NotRequired[str]  # the user cache folder for per-equation figures; absent: no disk cache
    xlaCompare: NotRequired[bool]  # also XLA's whole-program cost and memory analysis


class ValuesRequest(TypedDict):
    """A values run (``values/run.py``): the graph evaluated on the profile's concrete inputs."""

    timeout: NotRequired[float]  # the capture's time limit: the run stops, naming its node, before it
    save: NotRequired[str]  # an absolute path: write the selected values there (.npz)
    nodes: NotRequired[list[str]]  # what ``save`` writes: node ids, value ids, port labels (default: ports)
    inline: NotRequired[list[str]]  # value ids whose arrays come back in ``WorkerResult.arrays``


class TimeRequest(TypedDict):
    """A timed run (``timing.py``): the compiled program run on the profile's concrete inputs."""

    repeat: NotRequired[int]  # runs profiled after one warm-up (default 5)


class WorkerRequest(TypedDict):
    target: Target
    profile: ResolvedProfile
    workspaceRoot: str  # last on sys.path; the target's folder is first
    # after the target's folder on sys.path: where the call site the inputs came from imports
    # from (its file's first folder up without __init__.py, and its conftest.py files': pytest's
    # rootdir-relative insertion), so its refs (``test_generic:_Block``) and its imports load
    siteFolders: NotRequired[list[str]]
    offline: NotRequired[bool]  # a live trace: no connection to another machine (worker/core/offline.py)
    resultFd: int  # the private pipe the result is written to
    recipePath: NotRequired[str]  # hashed into ``sources``
    env: NotRequired[dict[str, str]]  # the profile's ``env`` names with the server's values
    # "packed": the graph in the compact form of ``jaxlsp.graph.io.to_compact`` (frames once each)
    transport: NotRequired[Literal["packed"]]
    # capture/launch/speculate.py: a Linen variables structure to use instead of the abstract init,
    # checked by the trace itself (worker/reuse/hints.py HintCheck); or an NNX / Equinox model's
    # abstract init, used when no workspace code it ran changed (worker/reuse/initsnap.py)
    structureHint: NotRequired[Json]
    # True: construct the NNX / Equinox model noting what ran, answer its snapshot as ``structure``
    # and trace nothing (the server asks in the background, worker/reuse/initsnap.py)
    snapshotOnly: NotRequired[bool]
    # with it: the library initialisers' abstract outputs the last capture met, so that the hint's
    # check need not run them again (worker/reuse/hints.py stable_key -> [shape, dtype, weak type])
    initialisers: NotRequired[dict[str, list[Json]]]
    # False: no replay of repeated Linen module calls (worker/reuse/replay.py), nor of a gradient's
    # transpositions of them (jaxcompat.TransposeMemo); every call is traced
    replay: NotRequired[bool]
    limits: NotRequired[dict[str, int]]  # graph-size limits {equations, values, bytes} (worker/tracing/limits.py)
    costs: NotRequired[CostOptions]  # measure XLA's costs of every equation (worker/program/costs.py)
    values: NotRequired[ValuesRequest]  # also evaluate the graph: statistics on every value
    compiled: NotRequired[bool]  # compile for the profile's devices and read the HLO back (worker/program/compiled.py)
    time: NotRequired[TimeRequest]  # also run the compiled program under the profiler (implies costs)
    # True: record the call signatures of the workspace's functions and module classes that run
    # (worker/examples/signatures.py); they come back as ``WorkerResult.signatures``
    signatures: NotRequired[bool]
    # jaxlsp learn: run the profile's example for its signatures alone, stopped after ``idle``
    # seconds without a new one or near ``deadline`` (worker/examples/learning.py); no graph
    learn: NotRequired[dict[str, float]]
    # The folder the graph's workspace paths are relative to (worker/core/paths.py); default workspaceRoot.
    # The CLI sends the recipe's folder.
    pathBase: NotRequired[str]


class ErrorInfo(TypedDict):
    kind: ErrorKind
    message: str  # one paragraph naming the cause
    # the user's source frame {path, line, column, endLine, endColumn}, and in a notebook its cell
    frame: NotRequired[dict[str, Any]]
    traceback: NotRequired[str]
    # the top-level name the failure needed that a ``load = "definitions"`` left unset (its
    # statement calls code): a live trace that chose that load itself is not live instead
    skipped: NotRequired[str]
    # a dimension traced symbolically could not stay a symbol (``int(n)``, ``if n > 3``, a
    # dimension given to NumPy): JAX's shape-polymorphism said so, not that shapes are wrong for
    # some sizes (that is an ordinary trace error, at its line)
    symbolic: NotRequired[SymbolicFailure]


class SymbolicFailure(TypedDict):
    """The worker's reading of a shape-polymorphism failure: the dimension names JAX quoted (the
    client keeps those of the profile's ``symbolic``; none: JAX did not say which)."""

    dimensions: list[str]


class InlineArray(TypedDict):
    """A values run's array sent inline: its elements as nested lists (non-finite numbers spelled
    as in the graph file), or why they were not sent (``omitted``, or ``error`` alone)."""

    shape: NotRequired[list[int]]
    dtype: NotRequired[str]
    data: NotRequired[Json]
    omitted: NotRequired[str]
    error: NotRequired[str]


class SavedValues(TypedDict):
    """The ``.npz`` a values run wrote: its keys, those not computed, and those widened to a dtype
    NumPy loads (key -> [its dtype, the dtype stored])."""

    path: str
    keys: list[str]
    missing: list[str]
    widened: NotRequired[dict[str, list[str]]]


class PathRoots(TypedDict):
    """What the graph's relative paths are relative to (worker/core/paths.py)."""

    base: str
    packages: dict[str, str]  # package -> its sys.path entry


class WorkerResult(TypedDict):
    ok: bool
    graph: NotRequired[dict[str, object]]  # the graph's JSON form (jaxlsp.graph.io.to_json)
    error: NotRequired[ErrorInfo]
    timings: NotRequired[dict[str, float]]  # seconds: import, trace, build, serialize
    clock: NotRequired[dict[str, float]]  # a forked capture: monotonic ``forked`` and ``done`` moments
    # Linen: the variables' structure; NNX, Equinox: the abstract init's snapshot (worker/reuse/initsnap.py):
    # the next capture's structureHint
    structure: NotRequired[Json]
    # whether the request's structureHint held, was repaired (parameters of other shapes or new
    # ones, hinted statistics of other shapes, traced again on the hint with their shapes: no
    # init either) or was not used
    hint: NotRequired[Literal["held", "repaired", "stale"]]
    replayed: NotRequired[int]  # Linen module calls whose equations were replayed (worker/reuse/replay.py)
    initialisers: NotRequired[dict[str, list[Json]]]  # a hinted trace's: the next request's (above)
    # NNX, Equinox: the constructor ran (no snapshot held): a ``snapshotOnly`` request would make one
    snapshotWanted: NotRequired[bool]
    # a forked capture's calls of JAX's jitted functions that missed JAX's caches, spelled for the
    # warm spare to make before its next fork (worker/reuse/priming.py)
    primes: NotRequired[list[list[object]]]  # each [function, args, kwargs, linearization], JSON
    arrays: NotRequired[dict[str, InlineArray]]  # values run: value id -> its array
    saved: NotRequired[SavedValues]  # values run: the written .npz
    # What the graph's relative paths are relative to: {base, packages: {package: sys.path entry}}
    # (worker/core/paths.py); the server resolves frames with it, the graph file never holds it.
    roots: NotRequired[PathRoots]
    # an example run: the user's line that made the call {path, line, function}, and the profile
    # learned from it {from, table?} (table: the recipe form, when the call can be written as one)
    callsite: NotRequired[dict[str, object]]
    # the client reads ``table`` as the recipe table it is (capture/engine.py): a JSON object
    learned: NotRequired[dict[str, Any]]
    # with ``signatures``: each target's first writable call {path, name, kind, table, callsite,
    # sources} (worker/examples/signatures.py)
    signatures: NotRequired[list[dict[str, object]]]
    # a learning run: {outcome, message} (how the example ended), and ``unspelled``: each target's
    # first call no recipe can spell {path, name, kind, test, callsite, sources} (kept to replay)
    learn: NotRequired[dict[str, Any]]
