"""Reading XLA's optimised HLO text (``jax.jit(f).lower(...).compile().as_text()``) back to graph nodes.

Stdlib only (it runs in the worker and in tests without jax). ``parse_module`` turns the text into
computations of instructions, each with its opcode, result shape, operand names, called
computations, replica groups and metadata (``op_name``, the source location from
``stack_frame_id`` or ``source_file``/``source_line``). ``map_module`` says which graph nodes each
instruction comes from.

What jax 0.10.2 emits (measured on CPU with 4 virtual devices): ``metadata={op_name="jit(f)/Dense_0/
dot_general" stack_frame_id=2}``, where the frame id points into the module's ``StackFrames`` /
``FileLocations`` / ``FileNames`` tables printed above the computations (absolute file paths,
1-based lines, UTF-8 byte columns); older versions print ``source_file=".." source_line=N``
instead. Instructions XLA inserts (an ``all-reduce`` after a dot over a sharded contracting axis,
the ``all-gather`` of a sharded weight) carry the metadata of the equation that caused them.
Replica groups come as ``{{0,1},{2,3}}``, as an iota ``[2,2]<=[4]`` (optionally transposed
``[2,2]<=[2,2]T(1,0)``) or over mesh axes ``mesh['axis_0'=4,'axis_1'=1] {'axis_0'}``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

# The opcodes of cross-device communication; the ``-start`` halves of async pairs count, their
# ``-done`` halves do not (one collective each).
COLLECTIVE_OPCODES = frozenset(
    {
        "all-reduce",
        "all-reduce-start",
        "all-gather",
        "all-gather-start",
        "reduce-scatter",
        "all-to-all",
        "ragged-all-to-all",
        "collective-permute",
        "collective-permute-start",
        "collective-broadcast",
    }
)
_ASYNC_SUFFIX = "-start"

_DTYPE_BYTES = {
    "pred": 1,
    "s2": 1,
    "s4": 1,
    "u2": 1,
    "u4": 1,
    "s8": 1,
    "u8": 1,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "f8e4m3": 1,
    "f8e3m4": 1,
    "f8e4m3b11fnuz": 1,
    "f8e4m3fnuz": 1,
    "f8e5m2fnuz": 1,
    "f8e8m0fnu": 1,
    "f4e2m1fn": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
    "token": 0,
}
# Instructions that make no buffer of their own: their result is (part of) their operands'.
NO_BUFFER_OPCODES = frozenset({"bitcast", "tuple", "get-tuple-element"})
# Instructions whose result XLA keeps in their operand's buffers: a loop updates its carry in place.
IN_PLACE_OPCODES = frozenset({"while", "opt-barrier", "optimization-barrier"})
# Instructions whose work is their called computations' (counted there, not as the call's bytes).
CONTROL_OPCODES = frozenset({"while", "conditional", "call", "async-start", "async-done"})
# Arithmetic counted as one flop per result element (transcendentals are counted apart by XLA).
ELEMENTWISE_FLOP_OPCODES = frozenset(
    {
        "add",
        "subtract",
        "multiply",
        "divide",
        "maximum",
        "minimum",
        "negate",
        "abs",
        "compare",
        "select",
        "clamp",
        "remainder",
        "power",
        "sign",
        "floor",
        "ceil",
        "round-nearest-afz",
        "round-nearest-even",
        "and",
        "or",
        "xor",
        "not",
    }
)
_ARRAY_RE = re.compile(r"\b([a-z][a-z0-9]*)\[([^\]]*)\]")
_INSTR_RE = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*(.*)$")
_COMP_RE = re.compile(r"^\s*(ENTRY\s+)?%?([^\s(]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_OPERAND_RE = re.compile(r"%([A-Za-z0-9_.\-]+)")
_COMMENT_RE = re.compile(r"/\*.*?\*/")
_META_RE = re.compile(r'(\w+)=("((?:[^"\\]|\\.)*)"|[^\s}]+)')
_SHAPE_RE = re.compile(r"(\S+?\[[^\]]*\](?:\{[^}]*\})?|token\[\]|\S+)\s+")
_OPCODE_RE = re.compile(r"([A-Za-z][\w\-]*)\(")
_LAYOUT_RE = re.compile(r"\{[^{}]*\}")
WRAPPED_RE = re.compile(r"[A-Za-z_][\w]*\((.*)\)")


@dataclass(frozen=True)
class SourceFrame:
    """One frame of an instruction's stack (innermost first): the file as the tracing process
    spelled it (usually absolute), 1-based lines, columns as XLA printed them (UTF-8 bytes)."""

    file: str
    function: str
    line: int
    end_line: int
    column: int
    end_column: int


@dataclass(frozen=True)
class Instruction:
    name: str  # without the leading ``%``
    opcode: str  # ``all-reduce``, ``fusion``, ``dot`` ...
    computation: str  # the computation that holds it
    shape: str  # the result shape as printed, layouts dropped: ``f32[8,16]``, ``(f32[2], s32[])``
    operands: tuple[str, ...]  # instruction names
    is_root: bool = False
    op_name: str = ""  # ``jit(f)/Dense_0/dot_general``; "" without metadata
    op_type: str = ""
    frames: tuple[SourceFrame, ...] = ()  # innermost first; () when the metadata names none
    called: tuple[str, ...] = ()  # computations it calls (``calls=``, ``to_apply=``, bodies ...)
    replica_groups: tuple[tuple[int, ...], ...] | None = None  # device ids; None when absent or unread
    replica_groups_text: str | None = None  # as printed
    fusion_kind: str | None = None  # kLoop, kInput, kOutput, kCustom (fusions only)
    sharding: str | None = None  # ``{devices=[1,4]<=[4]}`` as printed, None when not printed
    parameter_number: int | None = None  # ``parameter(N)``'s N
    attributes: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def source_file(self) -> str | None:
        return self.frames[0].file if self.frames else None

    @property
    def source_line(self) -> int | None:
        return self.frames[0].line if self.frames else None

    @property
    def primitive(self) -> str:
        """The jaxpr primitive named last in ``op_name`` (``dot_general``), "" without one."""
        return op_name_parts(self.op_name)[-1] if self.op_name else ""

    @property
    def is_collective(self) -> bool:
        return self.opcode in COLLECTIVE_OPCODES

    @property
    def collective_kind(self) -> str:
        """``all-reduce`` for both ``all-reduce`` and ``all-reduce-start``."""
        return self.opcode.removesuffix(_ASYNC_SUFFIX)

    @property
    def bytes(self) -> int:
        """Bytes of the result on one device (for an async ``-start``, of its last tuple element)."""
        if self.opcode.endswith(_ASYNC_SUFFIX) and self.shape.startswith("("):
            arrays = _ARRAY_RE.findall(self.shape)
            return _array_bytes(*arrays[-1]) if arrays else 0
        return shape_bytes(self.shape)


@dataclass(frozen=True)
class Computation:
    name: str
    instructions: tuple[Instruction, ...]
    is_entry: bool = False

    @property
    def root(self) -> Instruction | None:
        for instr in self.instructions:
            if instr.is_root:
                return instr
        return self.instructions[-1] if self.instructions else None


@dataclass(frozen=True)
class Module:
    name: str
    computations: dict[str, Computation]
    entry: str
    num_partitions: int = 1
    num_replicas: int = 1
    attributes: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    _names: dict[str, dict[str, Instruction]] = field(default_factory=dict, compare=False, hash=False, repr=False)
    # answers kept: "all" -> every instruction, ("members", computation, fusion) -> its members
    _cache: dict[str | tuple[str, str, str], list[Instruction]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    _fused: dict[str, set[str]] = field(default_factory=dict, compare=False, hash=False, repr=False)  # "inner"

    def entry_computation(self) -> Computation:
        return self.computations[self.entry]

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction of every computation, in the order printed."""
        every = self._cache.get("all")
        if every is None:
            every = self._cache["all"] = [i for comp in self.computations.values() for i in comp.instructions]
        return iter(every)

    def fused_computations(self) -> set[str]:
        """The computations that fusions call (their instructions run inside a kernel)."""
        inner = self._fused.get("inner")
        if inner is None:
            inner = self._fused["inner"] = {c for i in self.instructions() if i.opcode == "fusion" for c in i.called}
        return set(inner)

    def collectives(self) -> list[Instruction]:
        """The communication instructions of the whole module (inside loop bodies too)."""
        return [i for i in self.instructions() if i.is_collective]

    def fused_members(self, instr: Instruction) -> list[Instruction]:
        """The instructions a fusion (or call) computes: those of its called computations,
        recursively through nested fusions, without parameters and the nested fusion wrappers."""
        key = ("members", instr.computation, instr.name)
        known = self._cache.get(key)
        if known is not None:
            return list(known)
        out: list[Instruction] = []
        seen: set[str] = set()

        def visit(comp_name: str) -> None:
            if comp_name in seen or comp_name not in self.computations:
                return
            seen.add(comp_name)
            for member in self.computations[comp_name].instructions:
                if member.opcode == "parameter":
                    continue
                if member.opcode in ("fusion", "call") and member.called:
                    for c in member.called:
                        visit(c)
                    continue
                out.append(member)

        for c in instr.called:
            visit(c)
        self._cache[key] = out
        return list(out)

    def schedule(self) -> list[Instruction]:
        """The entry computation's instructions in the order they run (the printed order of a
        scheduled module, ``is_scheduled=true``)."""
        return list(self.entry_computation().instructions)

    def instruction(self, computation: str, name: str) -> Instruction | None:
        """An instruction by computation and name."""
        table = self._names.get(computation)
        if table is None:
            comp = self.computations.get(computation)
            table = self._names[computation] = {i.name: i for i in comp.instructions} if comp else {}
        return table.get(name)

    def operand_shapes(self, instr: Instruction) -> list[str]:
        """The printed shapes of an instruction's operands ("" where unknown)."""
        found = [self.instruction(instr.computation, o) for o in instr.operands]
        return [f.shape if f is not None else "" for f in found]

    def bytes_accessed(self, instr: Instruction) -> int:
        """Bytes an instruction reads and writes on one device: its operands' and its result
        (a fusion's: what crosses its boundary, as XLA counts a fused kernel). An estimate."""
        if (
            instr.opcode in NO_BUFFER_OPCODES
            or instr.opcode in CONTROL_OPCODES
            or instr.opcode in ("parameter", "constant")
        ):
            return 0
        return sum(shape_bytes(s) for s in self.operand_shapes(instr)) + shape_bytes(instr.shape)

    def flops(self, instr: Instruction) -> int:
        """Floating-point operations of one (unfused or fused) instruction on one device, by
        XLA's counting: 2 per multiply-add of a dot or convolution, 1 per element of arithmetic
        and reductions, none for transcendentals (counted apart), data movement and calls. An
        estimate from the printed shapes; the program's total from XLA is in its cost analysis."""
        out = array_dims(instr.shape)
        if out is None:
            return 0
        elements = _product(out)
        if instr.opcode == "dot":
            shapes = self.operand_shapes(instr)
            lhs = array_dims(shapes[0]) if shapes else None
            dims = [int(d) for d in re.findall(r"\d+", instr.attributes.get("lhs_contracting_dims", ""))]
            contracted = _product([lhs[d] for d in dims if lhs is not None and d < len(lhs)])
            return 2 * elements * contracted
        if instr.opcode == "convolution":
            shapes = self.operand_shapes(instr)
            rhs = array_dims(shapes[1]) if len(shapes) > 1 else None
            labels = instr.attributes.get("dim_labels", "")
            kernel = labels.split("_")[1].split("->")[0] if "_" in labels else ""
            if rhs is None or "o" not in kernel or len(kernel) != len(rhs):
                return 0
            # the kernel's input features are already per group (feature_group_count)
            per_output = _product(rhs) // max(1, rhs[kernel.index("o")])
            return 2 * elements * per_output
        if instr.opcode in ("reduce", "reduce-window"):
            shapes = self.operand_shapes(instr)
            first = array_dims(shapes[0]) if shapes else None
            return _product(first) if first is not None else 0
        if instr.opcode in ELEMENTWISE_FLOP_OPCODES:
            return elements
        return 0

    def schedule_peak(self) -> Peak:
        """The most bytes live at once on one device over the entry computation's schedule: the
        arguments throughout, each other result from the instruction that makes it to its last
        use (to the end when it is an output). Aliasing instructions (bitcast, tuple,
        get-tuple-element) make no buffer, a loop's result is its carry's; constants and the
        temporaries inside loop bodies and fusions are not counted. An estimate of XLA's buffer
        assignment, which may share or reuse buffers this walk keeps apart."""
        schedule = self.schedule()
        position = {i.name: k for k, i in enumerate(schedule)}
        by_name = {i.name: i for i in schedule}
        end = len(schedule)

        def sources(name: str, seen: frozenset[str] = frozenset()) -> list[str]:
            instr = by_name.get(name)
            if instr is None or name in seen:
                return []
            if instr.opcode in NO_BUFFER_OPCODES or instr.opcode in IN_PLACE_OPCODES:
                return [s for o in instr.operands for s in sources(o, seen | {name})]
            if instr.opcode == "constant":
                return []
            return [name]

        last: dict[str, int] = {}
        for k, instr in enumerate(schedule):
            for operand in instr.operands:
                for src in sources(operand):
                    last[src] = max(last.get(src, -1), k)
        root = self.entry_computation().root
        outputs = set(sources(root.name)) if root is not None else set()
        buffers: list[Buffer] = []
        for instr in schedule:
            if instr.opcode in NO_BUFFER_OPCODES or instr.opcode in IN_PLACE_OPCODES or instr.opcode == "constant":
                continue
            start = -1 if instr.opcode == "parameter" else position[instr.name]
            stop = end if instr.opcode == "parameter" or instr.name in outputs else last.get(instr.name, start)
            buffers.append(Buffer(instr, shape_bytes(instr.shape), start, stop, instr.name in outputs))
        if not schedule:
            return Peak(0, None, [])
        # a sweep over the schedule: each buffer adds its bytes at its start, takes them at its stop
        change = [0] * (end + 2)
        for b in buffers:
            change[max(b.start, 0)] += b.bytes
            change[min(b.stop, end) + 1] -= b.bytes
        best, best_at, total = -1, 0, 0
        for k in range(end):
            total += change[k]
            if total > best:
                best, best_at = total, k
        live = [b for b in buffers if b.start <= best_at <= b.stop]
        return Peak(max(best, 0), schedule[best_at], live)

    def fusions(self) -> list[Instruction]:
        """The fusion instructions of the non-fusion computations (the kernels that run)."""
        inner = self.fused_computations()
        return [
            i
            for comp in self.computations.values()
            if comp.name not in inner
            for i in comp.instructions
            if i.opcode == "fusion"
        ]


@dataclass(frozen=True)
class Buffer:
    """A result buffer of the entry computation's schedule, live from ``start`` to ``stop``
    (positions in the schedule; -1 for arguments, which are live before the first instruction)."""

    instruction: Instruction
    bytes: int
    start: int
    stop: int
    live_out: bool = False


@dataclass(frozen=True)
class Peak:
    bytes: int
    at: Instruction | None  # the instruction at which the most bytes are live
    live: list[Buffer]


def array_dims(shape: str) -> list[int] | None:
    """The dimensions of a printed array shape (``f32[8,16]`` -> ``[8, 16]``), None for a tuple
    or a dynamic shape."""
    found = _ARRAY_RE.fullmatch(shape.strip())
    if found is None:
        return None
    dims = []
    for d in found.group(2).split(","):
        d = d.strip()
        if not d:
            continue
        if not d.isdigit():
            return None
        dims.append(int(d))
    return dims


def _product(dims: list[int] | None) -> int:
    n = 1
    for d in dims or []:
        n *= d
    return n


def shape_bytes(shape: str) -> int:
    """Bytes of a printed HLO shape (tuples add up; ``token[]`` is 0)."""
    return sum(_array_bytes(dtype, dims) for dtype, dims in _ARRAY_RE.findall(_COMMENT_RE.sub("", shape)))


def _array_bytes(dtype: str, dims: str) -> int:
    n = 1
    for d in dims.split(","):
        d = d.strip().lstrip("<=")
        if d:
            n *= int(d)
    return n * _DTYPE_BYTES.get(dtype, 4)


def op_name_parts(op_name: str) -> list[str]:
    """``jit(f)/Dense_0/jit(relu)/max`` -> ``["jit(f)", "Dense_0", "jit(relu)", "max"]`` (slashes
    inside parentheses stay: ``transpose(jvp(a/b))`` is one part)."""
    return list(_op_name_parts(op_name))


@functools.lru_cache(maxsize=65536)
def _op_name_parts(op_name: str) -> tuple[str, ...]:
    """``jit(f)/Dense_0/jit(relu)/max`` -> ``["jit(f)", "Dense_0", "jit(relu)", "max"]`` (slashes
    inside parentheses stay: ``transpose(jvp(a/b))`` is one part)."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in op_name:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if ch == "/" and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return tuple(p for p in parts if p)


def scope_names(op_name: str) -> list[str]:
    """The plain names of ``op_name``'s name stack without the outermost ``jit(f)`` and the
    primitive, transforms unwrapped: ``jit(f)/transpose(jvp(Dense_0))/dot_general`` -> ``["Dense_0"]``."""
    parts = op_name_parts(op_name)[1:-1]
    names: list[str] = []
    for part in parts:
        inner = part
        while True:
            m = WRAPPED_RE.fullmatch(inner)
            if not m:
                break
            inner = m.group(1)
        names.extend(p for p in inner.split("/") if p)
    return names


# ---------------------------------------------------------------------------------------------
# Parsing


_SPECIAL = re.compile(r'[()\[\]{}"\\]|,')


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` (one character) outside brackets and quotes. Only the special characters
    are visited (a regex scan): attribute lists are long (backend configs, layouts)."""
    special = _SPECIAL if sep == "," else re.compile(r'[()\[\]{}"\\]|' + re.escape(sep))
    out: list[str] = []
    depth = 0
    quote = False
    escaped_until = -1
    begin = 0
    for m in special.finditer(text):
        i = m.start()
        if i < escaped_until:
            continue
        ch = text[i]
        if quote:
            if ch == "\\":
                escaped_until = i + 2
            elif ch == '"':
                quote = False
            continue
        if ch == '"':
            quote = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append(text[begin:i].strip())
            begin = i + 1
    tail = text[begin:].strip()
    if tail:
        out.append(tail)
    return out


_BRACKETS = re.compile(r'[()\[\]{}"\\]')


def _matching(text: str, start: int) -> int:
    """Index just past the bracket closing the one at ``start`` (quotes respected); only the
    special characters are visited."""
    opening = text[start]
    closing = {"(": ")", "[": "]", "{": "}"}[opening]
    depth = 0
    quote = False
    skip_to = -1
    for m in _BRACKETS.finditer(text, start):
        i = m.start()
        if i < skip_to:
            continue
        ch = text[i]
        if quote:
            if ch == "\\":
                skip_to = i + 2
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
        elif ch in "([{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                if ch != closing:
                    raise ValueError(f"unbalanced brackets at {i}")
                return i + 1
    raise ValueError(f"unclosed {opening!r} at {start}")


def parse_metadata(text: str) -> dict[str, str]:
    """``op_name="a b" stack_frame_id=2`` -> ``{"op_name": "a b", "stack_frame_id": "2"}``."""
    out: dict[str, str] = {}
    for m in _META_RE.finditer(text):
        out[m.group(1)] = m.group(3).replace('\\"', '"').replace("\\\\", "\\") if m.group(3) is not None else m.group(2)
    return out


def parse_replica_groups(text: str, num_devices: int | None = None) -> tuple[tuple[int, ...], ...] | None:
    """The device-id groups of ``replica_groups=``; None for a form this reader does not know."""
    text = text.strip()
    if text.startswith("{"):
        inner = text[1:-1].strip()
        if not inner:
            return (tuple(range(num_devices)),) if num_devices else ()
        groups = re.findall(r"\{([^{}]*)\}", inner)
        return tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in groups)
    m = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        group_shape = [int(x) for x in m.group(1).split(",")]
        reshape = [int(x) for x in m.group(2).split(",")]
        perm = [int(x) for x in m.group(3).split(",")] if m.group(3) else list(range(len(reshape)))
        ids = _iota_transposed(reshape, perm)
        size = group_shape[-1]
        count = 1
        for d in group_shape[:-1]:
            count *= d
        return tuple(tuple(ids[g * size : (g + 1) * size]) for g in range(count))
    m = re.fullmatch(r"mesh\[(.*?)\]\s*\{(.*)\}", text)
    if m:
        axes: list[tuple[str, int]] = []
        for item in split_top(m.group(1)):
            name, _, size_text = item.partition("=")
            axes.append((name.strip().strip("'\""), int(size_text)))
        chosen = [a.strip().strip("'\"") for a in split_top(m.group(2))]
        if any(c not in dict(axes) for c in chosen):
            return None  # sub-axis forms ``'x':(1)2``: keep the text only
        return _mesh_groups(axes, chosen)
    return None


def _iota_transposed(dims: list[int], perm: list[int]) -> list[int]:
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    tdims = [dims[p] for p in perm]
    tstrides = [strides[p] for p in perm]
    out: list[int] = []

    def walk(axis: int, offset: int) -> None:
        if axis == len(tdims):
            out.append(offset)
            return
        for k in range(tdims[axis]):
            walk(axis + 1, offset + k * tstrides[axis])

    walk(0, 0)
    return out


def _mesh_groups(axes: list[tuple[str, int]], chosen: list[str]) -> tuple[tuple[int, ...], ...]:
    """Devices numbered row-major over the mesh; a group varies the chosen axes, fixes the rest."""
    names = [a for a, _ in axes]
    sizes = [s for _, s in axes]
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = strides[i + 1] * sizes[i + 1]
    fixed = [i for i, n in enumerate(names) if n not in chosen]
    varying = [names.index(c) for c in chosen]

    def combos(idxs: list[int]) -> list[int]:
        offsets = [0]
        for i in idxs:
            offsets = [o + k * strides[i] for o in offsets for k in range(sizes[i])]
        return offsets

    return tuple(tuple(base + v for v in combos(varying)) for base in combos(fixed))


def _frame_tables(lines: list[str]) -> tuple[dict[int, SourceFrame], dict[int, int]]:
    """The ``StackFrames`` tables: frame id -> its location's frame, and frame id -> parent id."""
    section = ""
    files: dict[int, str] = {}
    functions: dict[int, str] = {}
    locations: dict[int, dict[str, str]] = {}
    frames: dict[int, dict[str, str]] = {}
    for line in lines:
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = s
            continue
        if not s or s.startswith(("%", "ENTRY", "HloModule", "ROOT")):
            if s.startswith(("%", "ENTRY")):
                break
            continue
        m = re.match(r"(\d+)\s+(.*)$", s)
        if not m or not section:
            continue
        key, rest = int(m.group(1)), m.group(2)
        if section == "FileNames":
            files[key] = _unquote(rest)
        elif section == "FunctionNames":
            functions[key] = _unquote(rest)
        elif section == "FileLocations":
            locations[key] = parse_metadata(rest.strip("{}"))
        else:
            frames[key] = parse_metadata(rest.strip("{}"))
    resolved: dict[int, SourceFrame] = {}
    parents: dict[int, int] = {}
    for fid, f in frames.items():
        loc = locations.get(int(f.get("file_location_id", "0")))
        if loc is None:
            continue
        resolved[fid] = SourceFrame(
            file=files.get(int(loc.get("file_name_id", "0")), ""),
            function=functions.get(int(loc.get("function_name_id", "0")), ""),
            line=int(loc.get("line", "0")),
            end_line=int(loc.get("end_line", loc.get("line", "0"))),
            column=int(loc.get("column", "0")),
            end_column=int(loc.get("end_column", loc.get("column", "0"))),
        )
        parents[fid] = int(f.get("parent_frame_id", "0"))
    return resolved, parents


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def _stack(fid: int, frames: dict[int, SourceFrame], parents: dict[int, int]) -> tuple[SourceFrame, ...]:
    """The frame and its parents, innermost first. Only the innermost is certain: jax 0.10.2 prints
    parent ids that do not always form the call chain, so callers should trust ``frames[0]``."""
    out: list[SourceFrame] = []
    seen: set[int] = set()
    while fid in frames and fid not in seen:
        seen.add(fid)
        out.append(frames[fid])
        fid = parents.get(fid, 0)
    return tuple(out)


def _parse_instruction(
    line: str, computation: str, frames: dict[int, SourceFrame], parents: dict[int, int], devices: int
) -> Instruction | None:
    m = _INSTR_RE.match(line)
    if not m:
        return None
    rest = m.group(3)
    is_root, name, rest = bool(m.group(1)), m.group(2).lstrip("%"), _COMMENT_RE.sub("", rest) if "/*" in rest else rest
    # the result shape: a tuple in parentheses or one array type with an optional layout
    if rest.startswith("("):
        end = _matching(rest, 0)
        shape, rest = rest[:end], rest[end:].lstrip()
    else:
        sm = _SHAPE_RE.match(rest)
        if not sm:
            return None
        shape, rest = sm.group(1), rest[sm.end() :]
    om = _OPCODE_RE.match(rest)
    if not om:
        return None
    opcode = om.group(1)
    close = _matching(rest, om.end() - 1)
    operands = tuple(_OPERAND_RE.findall(rest[om.end() : close - 1]))
    attrs: dict[str, str] = {}
    for item in split_top(rest[close:].lstrip(", ")):
        key, eq, value = item.partition("=")
        if eq:
            attrs[key.strip()] = value.strip()
    meta = parse_metadata(attrs.get("metadata", "").strip("{}"))
    stack: tuple[SourceFrame, ...] = ()
    if "stack_frame_id" in meta:
        stack = _stack(int(meta["stack_frame_id"]), frames, parents)
    elif "source_file" in meta:
        line_no = int(meta.get("source_line", "0"))
        stack = (
            SourceFrame(
                file=meta["source_file"],
                function="",
                line=line_no,
                end_line=int(meta.get("source_end_line", line_no)),
                column=int(meta.get("source_column", "0")),
                end_column=int(meta.get("source_end_column", meta.get("source_column", "0"))),
            ),
        )
    called: list[str] = []
    for key in (
        "calls",
        "to_apply",
        "body",
        "condition",
        "branch_computations",
        "true_computation",
        "false_computation",
    ):
        if key in attrs:
            called.extend(_OPERAND_RE.findall(attrs[key]) or [attrs[key].strip("{}%")])
    groups_text = attrs.get("replica_groups")
    return Instruction(
        name=name,
        opcode=opcode,
        computation=computation,
        shape=_LAYOUT_RE.sub("", shape) if "{" in shape else shape,
        operands=operands,
        is_root=is_root,
        op_name=meta.get("op_name", ""),
        op_type=meta.get("op_type", ""),
        frames=stack,
        called=tuple(called),
        replica_groups=parse_replica_groups(groups_text, devices) if groups_text is not None else None,
        replica_groups_text=groups_text,
        fusion_kind=attrs.get("kind") if opcode == "fusion" else None,
        sharding=attrs.get("sharding"),
        parameter_number=_int_or_none(rest[om.end() : close - 1]) if opcode == "parameter" else None,
        attributes=attrs,
    )


def _int_or_none(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_module(text: str) -> Module:
    """Parse the text of one HLO module (``Compiled.as_text()``). Raises ValueError naming the line
    it could not read when the text is no HLO module."""
    lines = text.splitlines()
    header = next((ln for ln in lines if ln.startswith("HloModule ")), None)
    if header is None:
        raise ValueError("not an HLO module: no line starts with 'HloModule'")
    head_name, _, head_rest = header[len("HloModule ") :].partition(",")
    module_attrs: dict[str, str] = {}
    for item in split_top(head_rest):
        key, _, value = item.partition("=")
        module_attrs[key.strip()] = value.strip()
    partitions = int(module_attrs.get("num_partitions", "1"))
    replicas = int(module_attrs.get("replica_count", "1"))
    frames, parents = _frame_tables(lines)
    computations: dict[str, Computation] = {}
    entry = ""
    current: str | None = None
    is_entry = False
    body: list[Instruction] = []
    for number, line in enumerate(lines, 1):
        s = line.strip()
        if current is None:
            cm = _COMP_RE.match(line)
            if cm:
                current, is_entry, body = cm.group(2), bool(cm.group(1)), []
            continue
        if s == "}":
            computations[current] = Computation(current, tuple(body), is_entry)
            if is_entry:
                entry = current
            current = None
            continue
        if not s:
            continue
        try:
            instr = _parse_instruction(line, current, frames, parents, partitions * replicas)
        except ValueError as exc:
            raise ValueError(f"HLO line {number}: {exc}: {s[:200]}") from None
        if instr is None:
            raise ValueError(f"HLO line {number}: not an instruction: {s[:200]}")
        body.append(instr)
    if current is not None:
        raise ValueError(f"HLO computation {current} is not closed")
    if not entry:
        raise ValueError("HLO module has no ENTRY computation")
    return Module(head_name.strip(), computations, entry, partitions, replicas, module_attrs)


# ---------------------------------------------------------------------------------------------
# Back to graph nodes
