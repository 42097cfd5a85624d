"""The canonical graph as stdlib dataclasses (docs/graph-format.md; JSON Schema in schema.json).

Stdlib only: the capture worker imports this module inside the user's interpreter. The JSON
form uses the camelCase keys of the format (``weakType``, ``endLine``); ``to_json`` /
``from_json`` in :mod:`jaxlsp.graph.io` convert. Also the format's constants: its name, versions,
backend, the roles of ports and the kinds of values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FORMAT = "jaxlsp.graph"
VERSION = 1  # the expanded form: every node and value an object (what ``to_json`` gives)
COMPACT_VERSION = 2  # the same graph as columns and interned tables (jaxlsp.graph.compact_write)
BACKEND = "jaxpr"
VERSION_KEYS = ("jax", "jaxlib", "flax", "equinox", "python")
INPUT_ROLES = ("parameter", "state", "input", "key", "constant")
OUTPUT_ROLES = ("output", "state")
VALUE_KINDS = ("var", "literal", "const")
FRAME_TABLE = "frameTable"  # only in earlier workers' pipe form (to_frame_table), never in a graph file


@dataclass
class Frame:
    """A source position: 1-based lines, 0-based code-point columns (end exclusive). In a notebook
    (``path`` ends with ``.ipynb``) ``cell`` is the index into its cells and lines count within it."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    function: str | None = None
    # A library frame: its top-level package (``flax``); ``path`` is then relative to that
    # package's ``sys.path`` entry (``flax/linen/linear.py``). None for workspace frames, whose
    # path is relative to the workspace root.
    package: str | None = None
    # In a notebook (``path`` ends with ``.ipynb``): the index of the cell in its cells; ``line``
    # and ``end_line`` then count within that cell.
    cell: int | None = None

    def range_json(self) -> dict[str, str | int]:
        """The range as the graph's JSON spells it (``path``, ``line``, ``column``, ``endLine``,
        ``endColumn``), with ``cell`` in a notebook: one spelling for the frames of every section."""
        out: dict[str, str | int] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "endLine": self.end_line,
            "endColumn": self.end_column,
        }
        if self.cell is not None:
            out["cell"] = self.cell
        return out


@dataclass
class Value:
    id: str  # "v0", "v1", ... in traversal order
    shape: list[int | str]  # a str is a symbolic dimension ("batch", "2*batch")
    dtype: str  # "float32", "key<fry>", ...
    weak_type: bool = False
    producer: str | None = None  # node id, or None for graph inputs, literals and constants
    literal: Any = None  # small constant values inline (JSON-safe), else None
    kind: str = "var"  # var | literal | const
    # Inside a shard_map (pmap) body: ``shape`` is one device's part; ``global_shape`` the whole
    # array's where known (the body's inputs and results).
    per_device: bool = False
    global_shape: list[int | str] | None = None
    # Statistics of the value on real inputs (a values run; docs/graph-format.md "Statistics"),
    # None in a shapes-only graph and for values a run did not compute (keys, untaken branches).
    stats: dict[str, Any] | None = None
    # Its sharding where jax's type carries one (explicit sharding: ``f32[8@x,64]``):
    # ``{"spec": [["x"], None], "unreduced"?: [...], "reduced"?: [...], "varying"?: [...]}``, one
    # ``spec`` entry per dimension (the mesh axes it is split over, major first, or None). None
    # when the value is not split over any axis (a single device, or replicated over the mesh).
    sharding: dict[str, Any] | None = None


@dataclass
class Node:
    id: str  # "n0", "n1", ...: distinct per call site, even for a shared sub-jaxpr
    primitive: str
    params: dict[str, Any]  # JSON-safe; unrepresentable values become {"opaque": repr[:200]}
    inputs: list[str]  # value ids
    outputs: list[str]  # value ids
    scope: str  # "/"-joined module path ("Encoder_0/Dense_1", "blocks/0/attn"), "" at top
    group: str | None  # the innermost group holding this node, None at the top level
    source: Frame | None  # the innermost workspace frame
    frames: list[Frame] = field(default_factory=list)  # the user frame stack, innermost first
    transforms: list[str] = field(default_factory=list)  # name-stack transforms: vmap, jvp, transpose
    # XLA's figures for one execution and how often it runs ({flops, bytes, transcendentals, runs, ...}:
    # jaxlsp.graph.costs); None when the trace did not measure costs
    costs: dict[str, Any] | None = None


@dataclass
class Group:
    id: str  # "g0", ...
    kind: str  # module | jit | remat | custom_jvp | custom_vjp | cond | cond_branch | while |
    # while_cond | while_body | scan | shard_map | custom_linear_solve | pjit ...
    parent: str | None
    label: str  # "Dense_0", "jit(relu)", "scan (length 12)", "branch 1"
    node: str | None = None  # the equation that owns this region (for sub-jaxpr groups)


@dataclass
class Port:
    """A graph input or output: which value, its pytree label, and its role."""

    value: str
    label: str  # pytree path: "params/Dense_0/kernel", "args/0", "kwargs/train", "out/0"
    role: str  # inputs: parameter | state | input | key | constant; outputs: output | state


@dataclass
class Coverage:
    scope: str = "traced_program"
    complete: bool = True
    opaque: list[dict[str, Any]] = field(default_factory=list)  # {"node": id, "reason": str}
    notes: list[str] = field(default_factory=list)  # "control-flow bodies are traced, not executed"
    effects: list[str] = field(default_factory=list)


@dataclass
class Graph:
    target: dict[str, Any]  # {"path", "name", "kind"}
    profile: dict[str, Any]  # {"name": str | None, ...the resolved profile as used}
    versions: dict[str, str | None]  # jax, jaxlib, flax, equinox, python
    coverage: Coverage
    sources: dict[str, str]  # path -> sha256 hex
    inputs: list[Port]
    outputs: list[Port]
    nodes: list[Node]
    values: list[Value]
    groups: list[Group]
    costs: dict[str, Any] | None = None  # how the per-node costs were measured (jaxlsp.graph.costs)
    # What a values run found (docs/graph-format.md "Execution"): validation, the first non-finite
    # value, executed regions, gradient norms. None in a shapes-only graph.
    execution: dict[str, Any] | None = None
    # The workspace's jaxtyping annotations checked against the traced values (docs/graph-format.md
    # "Contracts"): {checked, violations, notes?}. None when the workspace does not use jaxtyping.
    contracts: dict[str, Any] | None = None
    # The mesh the values' shardings name (docs/graph-format.md "Shardings"): ``{"axisNames": [...],
    # "axisSizes": [...], "axisTypes": ["Explicit", ...]}``. None when the program saw no mesh.
    mesh: dict[str, Any] | None = None
    # What XLA made of the program (docs/graph-format.md "Compiled"): collectives, fusions,
    # per-device shapes, costs and memory of the compiled program. None unless traced --compiled.
    compiled: dict[str, Any] | None = None
    # Measured device time (``jaxlsp trace --time``; docs/graph-format.md "Time", jaxlsp.graph.timing):
    # the step, seconds per node, line and module, the HLO ops that ran. None when not timed.
    time: dict[str, Any] | None = None
    format: str = FORMAT
    version: int = VERSION
    backend: str = BACKEND
