"""HLO instructions mapped back to graph nodes (stdlib only): by each instruction's source frames
and op names against the nodes' frames and scopes, best first; a fusion by its members.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from jaxlsp.worker.program.hlo import WRAPPED_RE, Instruction, Module, SourceFrame, op_name_parts, scope_names


class _FrameLike(Protocol):
    path: str
    line: int
    column: int


class NodeLike(Protocol):
    """What the mapping reads of a graph node (``jaxlsp.graph.model.Node`` fits)."""

    id: str
    primitive: str
    scope: str

    @property
    def source(self) -> _FrameLike | None: ...

    @property
    def frames(self) -> Sequence[_FrameLike | None] | None: ...


# HLO op names that differ from the jaxpr primitive whose equation they come from.
PRIMITIVE_ALIASES = {
    "psum_invariant": ("psum", "psum2", "psum_invariant"),
    "psum": ("psum", "psum2", "psum_invariant"),
    "pmax": ("pmax",),
    "all_gather_invariant": ("all_gather", "all_gather_invariant"),
}


@dataclass
class NodeIndex:
    """Graph nodes keyed for the lookup: by (primitive, line), by line and by primitive; with each
    node's frames and scope parts read once, and the answers of ``map_instruction`` kept (the
    instructions of one equation share their metadata)."""

    by_prim_line: dict[tuple[str, int], list[NodeLike]] = field(default_factory=dict)
    by_line: dict[int, list[NodeLike]] = field(default_factory=dict)
    by_prim: dict[str, list[NodeLike]] = field(default_factory=dict)
    frames: dict[str, dict[int, list[tuple[str, int]]]] = field(default_factory=dict)  # id -> line -> (path, column)
    scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # id -> scope parts
    answers: dict[tuple[str, SourceFrame | None], list[str]] = field(default_factory=dict)
    # (primitive, line) -> scope -> the nodes of that group with that scope (built when first asked)
    by_scope: dict[tuple[str, int], dict[str, list[NodeLike]]] = field(default_factory=dict)

    def scoped(self, prim: str, line: int) -> dict[str, list[NodeLike]]:
        found = self.by_scope.get((prim, line))
        if found is None:
            found = self.by_scope[(prim, line)] = {}
            for n in self.by_prim_line.get((prim, line), []):
                found.setdefault("/".join(self.scopes[n.id]), []).append(n)
        return found

    @classmethod
    def build(cls, nodes: Iterable[NodeLike]) -> NodeIndex:
        index = cls()
        for node in nodes:
            index.by_prim.setdefault(node.primitive, []).append(node)
            frames = _node_frames(node)
            by_line: dict[int, list[tuple[str, int]]] = {}
            for f in frames:
                by_line.setdefault(f.line, []).append((f.path, f.column))
            index.frames[node.id] = by_line
            index.scopes[node.id] = tuple(p for p in (node.scope or "").split("/") if p)
            for line in {f.line for f in frames}:
                index.by_prim_line.setdefault((node.primitive, line), []).append(node)
                index.by_line.setdefault(line, []).append(node)
        return index


@functools.lru_cache(maxsize=65536)
def _same_file(hlo_file: str, graph_path: str) -> bool:
    """The graph's path is relative (to the workspace or a ``sys.path`` entry), XLA's absolute."""
    if not hlo_file or not graph_path:
        return True  # nothing to tell them apart
    a = hlo_file.replace("\\", "/")
    b = graph_path.replace("\\", "/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


@functools.lru_cache(maxsize=65536)
def _stack_names(op_name: str) -> frozenset[str]:
    """The name stack's names, the worker's marked scopes (``jaxlsp::blocks``) also without their mark."""
    names = set(scope_names(op_name))
    return frozenset(names | {n.rsplit("::", 1)[-1] for n in names})


@functools.lru_cache(maxsize=65536)
def _module_paths(op_name: str) -> tuple[str, ...]:
    """Every contiguous run of the name stack's module names (``jit(...)`` wrappers left out,
    transforms unwrapped, the worker's marks dropped), longest first: the scopes a node of this
    instruction may have."""
    parts = op_name_parts(op_name)[1:-1]
    names: list[str] = []
    for part in parts:
        if part.startswith(("jit(", "pjit(")):
            continue
        inner = part
        while (m := WRAPPED_RE.fullmatch(inner)) is not None:
            inner = m.group(1)
        names.extend(p.rsplit("::", 1)[-1] for p in inner.split("/") if p)
    runs = {"/".join(names[i:j]) for i in range(len(names)) for j in range(i + 1, len(names) + 1)}
    return tuple(sorted(runs, key=lambda r: (-r.count("/"), r)))


def _node_frames(node: NodeLike) -> list[_FrameLike]:
    frames = [f for f in (node.frames or []) if f is not None]
    if node.source is not None and all(f is not node.source for f in frames):
        frames.insert(0, node.source)
    return frames


def _score(frame: SourceFrame | None, names: frozenset[str], nid: str, index: NodeIndex) -> tuple[int, int, int]:
    """Higher is better: the frame matches (file, line, column), then the name stack agrees."""
    best_frame = 0
    if frame is not None:
        for path, column in index.frames[nid].get(frame.line, ()):
            if _same_file(frame.file, path):
                best_frame = max(best_frame, 2 if column == frame.column else 1)
    parts = index.scopes[nid]
    agree = sum(map(names.__contains__, parts))
    return best_frame, agree, agree - len(parts)


def map_instruction(instr: Instruction, index: NodeIndex) -> list[str]:
    """The graph nodes an instruction (not a fusion: see ``map_module``) comes from, best first.

    First the equations of its primitive at its source frame (file and line; the column and the
    name stack break ties); else the equations at that frame whatever their primitive (an op XLA
    rewrote); without a source frame, the equations of its primitive whose scope agrees with the
    name stack, when that picks them out. [] when neither its metadata nor the graph tell."""
    frame = instr.frames[0] if instr.frames else None
    key = (instr.op_name, frame)
    known = index.answers.get(key)
    if known is not None:
        return list(known)
    prim = instr.primitive
    aliases = PRIMITIVE_ALIASES.get(prim, (prim,))
    names = _stack_names(instr.op_name)
    scored: list[tuple[tuple[int, int, int], str]] = []
    if frame is not None:
        # the nodes whose whole scope the name stack spells first (one lookup each, instead of
        # scoring the dozens of layers a library line serves); all of them when none does
        for p in aliases:
            groups = index.scoped(p, frame.line)
            for path in _module_paths(instr.op_name) if len(groups) > 1 else ():
                for n in groups.get(path, []):
                    s = _score(frame, names, n.id, index)
                    if s[0] > 0:
                        scored.append((s, n.id))
                if scored:
                    break
        if not scored:
            for p in aliases:
                for n in index.by_prim_line.get((p, frame.line), []):
                    s = _score(frame, names, n.id, index)
                    if s[0] > 0:
                        scored.append((s, n.id))
        if not scored:
            for n in index.by_line.get(frame.line, []):
                s = _score(frame, names, n.id, index)
                if s[0] > 0:
                    scored.append((s, n.id))
    elif prim:
        for p in aliases:
            scored.extend((_score(None, names, n.id, index), n.id) for n in index.by_prim.get(p, []))
        if len(scored) > 1 and max(s[1] for s, _ in scored) == 0:
            scored = []  # the primitive occurs in several places and nothing tells which
    ids: list[str] = []
    if scored:
        top = max(s for s, _ in scored)
        for s, nid in scored:
            if s == top and nid not in ids:
                ids.append(nid)
    index.answers[key] = ids
    return list(ids)


def map_module(module: Module, nodes: Sequence[NodeLike], index: NodeIndex | None = None) -> dict[str, list[str]]:
    """Instruction name -> graph node ids, for every instruction of the module's non-fusion
    computations that maps to any: a fusion maps to the union of its members' nodes (in the order
    of its members), every other instruction through ``map_instruction``. ``index``: one built
    already for these nodes (its answers are shared)."""
    index = index if index is not None else NodeIndex.build(nodes)
    inner = module.fused_computations()
    out: dict[str, list[str]] = {}
    for comp in module.computations.values():
        if comp.name in inner:
            continue
        for instr in comp.instructions:
            if instr.opcode == "parameter":
                continue
            ids: list[str] = []
            members = module.fused_members(instr) if instr.opcode == "fusion" else [instr]
            for member in members:
                for nid in map_instruction(member, index):
                    if nid not in ids:
                        ids.append(nid)
            if not ids and instr.opcode == "fusion":
                ids = map_instruction(instr, index)
            if ids:
                out[instr.name] = ids
    return out


# Opcodes of the instructions XLA inserts to hand a value on in another type, buffer or layout
# (bf16 upcasts around a CPU dot, a TPU's prefetch of a weight into its fast memory, a loop
# carry's copy): they carry no metadata of their own, but the HLO says whose value they move.
VALUE_OPCODES = frozenset(
    {"convert", "bitcast", "bitcast-convert", "copy", "copy-start", "copy-done", "reshape", "transpose"}
    | {"get-tuple-element"}
)


def is_value_op(module: Module, instr: Instruction) -> bool:
    """An instruction (or a fusion of such) that only converts, copies or re-lays a value."""
    if instr.opcode == "fusion":
        members = module.fused_members(instr)
        return bool(members) and all(m.opcode in VALUE_OPCODES or m.opcode == "constant" for m in members)
    return instr.opcode in VALUE_OPCODES


def value_owners(module: Module, mapped: dict[str, list[str]]) -> dict[str, tuple[list[str], str]]:
    """The instructions of ``map_module``'s answer that map to no node but only move a value
    (``is_value_op``), each given the nodes of the equation whose value it moves: that of the
    instruction producing its operand, through other such ops; where the value comes from no
    equation (a program input, a constant), those of the instructions that read its result (the
    dot an input is converted for). Instruction name -> (node ids, the instruction they were
    taken from); an op whose HLO says neither is left out (not attributed)."""
    inner = module.fused_computations()
    users: dict[str, dict[str, list[Instruction]]] = {}
    for comp in module.computations.values():
        if comp.name in inner:
            continue
        table = users[comp.name] = {}
        for instr in comp.instructions:
            for operand in instr.operands:
                table.setdefault(operand, []).append(instr)

    def producers(instr: Instruction, seen: set[str]) -> tuple[list[str], str]:
        for name in instr.operands:
            if name in mapped:
                return list(mapped[name]), name
            found = module.instruction(instr.computation, name)
            if found is not None and found.name not in seen and is_value_op(module, found):
                seen.add(found.name)
                ids, via = producers(found, seen)
                if ids:
                    return ids, via
        return [], ""

    def readers(instr: Instruction, seen: set[str]) -> tuple[list[str], str]:
        ids: list[str] = []
        via = ""
        for user in users.get(instr.computation, {}).get(instr.name, []):
            if user.name in seen:
                continue
            seen.add(user.name)
            if user.name in mapped:
                got, name = mapped[user.name], user.name
            elif is_value_op(module, user):
                got, name = readers(user, seen)
            else:
                continue
            ids.extend(i for i in got if i not in ids)
            via = via or name
        return ids, via

    out: dict[str, tuple[list[str], str]] = {}
    for comp in module.computations.values():
        if comp.name in inner:
            continue
        for instr in comp.instructions:
            if instr.name in mapped or instr.opcode == "parameter" or not is_value_op(module, instr):
                continue
            ids, via = producers(instr, {instr.name})
            if not ids:
                ids, via = readers(instr, {instr.name})
            if ids:
                out[instr.name] = (ids, via)
    return out
