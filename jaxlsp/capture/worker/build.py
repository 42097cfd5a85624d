"""Walking a ClosedJaxpr into the canonical graph: nodes, values, groups, scopes and source frames.

Values are numbered in traversal order and keyed per call site (each sub-jaxpr walk has its own
environment), so a shared sub-jaxpr called twice yields distinct nodes and values. A region body
whose operands correspond 1:1 to the equation's (jit, remat, custom_jvp/vjp, cond branches) reads
the outer values directly, so edges connect into it; loop bodies (while, scan) read only their
loop-invariant consts from outside. Every value has exactly one producer: the region's results
are the higher-order node's own outputs (the i-th output corresponds to the body's i-th result).
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import os
from dataclasses import dataclass
from typing import Any

from jaxlsp.capture.worker import jaxcompat
from jaxlsp.capture.worker.failures import Workspace, code_points
from jaxlsp.capture.worker.scopes import SCOPE_MARK
from jaxlsp.graph.model import Coverage, Frame, Group, Node, Port, Value

INLINE_LIMIT = 16  # elements of a literal or constant shown inline
CONTROL_FLOW_NOTE = "control-flow bodies (cond, while, scan) are traced, not executed"

ONE_TO_ONE = {
    "jit": "jit",
    "pjit": "jit",
    "closed_call": "jit",
    "core_call": "jit",
    "remat2": "remat",
    "checkpoint": "remat",
    "remat": "remat",
    "custom_jvp_call": "custom_jvp",
    "custom_vjp_call": "custom_vjp",
    "custom_vjp_call_jaxpr": "custom_vjp",
}
_RULE_PARAMS = frozenset(
    {"jvp", "jvp_jaxpr_fun", "jvp_jaxpr_thunk", "fwd_jaxpr_thunk", "bwd", "out_trees", "fwd", "transpose"}
)


@dataclass
class Region:
    jaxpr: Any  # an open Jaxpr
    consts: list[Any] | None  # a ClosedJaxpr's consts
    group: str  # the group its nodes belong to
    inputs: dict[int, str]  # invar index -> outer value id


@dataclass
class Step:
    """One equation as walked: what a values run evaluates (``values/interpret.py``)."""

    eqn: Any
    node: Node
    regions: list[Walked]  # the equation's regions in the order the builder made them


@dataclass
class Walked:
    """One walk of a jaxpr (a region at one call site): its variables' value ids and its steps.

    ``fresh`` lists the invars that got values of their own (loop carries, slices of scanned
    arrays), by index; the others read the enclosing values directly."""

    jaxpr: Any
    consts: list[Any] | None
    group: str | None
    env: dict[Any, str]
    steps: list[Step]
    fresh: list[int]


@dataclass
class Context:
    group: str | None
    base_scope: tuple[str, ...]
    prefix: list[tuple[str, str]]  # the enclosing name-stack items
    source: Frame | None
    frames: list[Frame]


class GraphBuilder:
    def __init__(self, workspace: Workspace, scope_mode: str = "stack", record: bool = False):
        self.workspace = workspace
        self.record = record  # keep the walk (``self.walked``) for a values run
        self.walked: Walked | None = None
        self.scope_mode = scope_mode
        self.nodes: list[Node] = []
        self.values: list[Value] = []
        self.groups: list[Group] = []
        self.coverage = Coverage()
        self.frame_files: set[str] = set()
        self._frames: dict[jaxcompat.RawFrame, Frame] = {}
        self._module_groups: dict[tuple[str | None, tuple[str, ...]], str] = {}
        self._effects: set[str] = set()
        self._dtypes: dict[Any, str] = {}

    # --- values ---------------------------------------------------------------------------------

    def new_value(self, aval: Any, producer: str | None = None, kind: str = "var", literal: Any = None) -> str:
        vid = f"v{len(self.values)}"
        shape = [_dim(d) for d in getattr(aval, "shape", ())]
        dtype = getattr(aval, "dtype", None)
        name = self._dtypes.get(dtype) if dtype is not None else None
        if name is None:
            name = str(dtype) if dtype is not None else type(aval).__name__.replace("Abstract", "").lower()
            if dtype is not None:
                self._dtypes[dtype] = name
        self.values.append(
            Value(
                id=vid,
                shape=shape,
                dtype=name,
                weak_type=bool(aval.weak_type),
                producer=producer,
                literal=literal,
                kind=kind,
            )
        )
        return vid

    def literal_value(self, lit: Any) -> str:
        return self.new_value(lit.aval, kind="literal", literal=small_array(lit.val))

    def const_value(self, var: Any, const: Any) -> str:
        return self.new_value(var.aval, kind="const", literal=small_array(const))

    def read(self, env: dict[Any, str], atom: Any) -> str:
        if is_literal(atom):
            return self.literal_value(atom)
        vid = env.get(atom)
        if vid is None:
            vid = self.new_value(atom.aval)
            env[atom] = vid
        return vid

    # --- entry ------------------------------------------------------------------------------------

    def build(
        self, closed: Any, input_labels: list[tuple[str, str]], output_labels: list[tuple[str, str]]
    ) -> tuple[list[Port], list[Port]]:
        jaxpr = closed.jaxpr
        env: dict[Any, str] = {}
        inputs: list[Port] = []
        for i, (var, const) in enumerate(zip(jaxpr.constvars, closed.consts, strict=False)):
            env[var] = self.const_value(var, const)
            inputs.append(Port(value=env[var], label=f"const/{i}", role="constant"))
        for i, var in enumerate(jaxpr.invars):
            vid = self.new_value(var.aval)
            env[var] = vid
            label, role = input_labels[i] if i < len(input_labels) else (f"in/{i}", "input")
            inputs.append(Port(value=vid, label=label, role=role))
        top = Walked(jaxpr, list(closed.consts), None, env, [], []) if self.record else None
        self.walked = top
        self.walk(jaxpr, env, Context(None, (), [], None, []), top)
        outputs: list[Port] = []
        for i, atom in enumerate(jaxpr.outvars):
            vid = self.read(env, atom)
            label, role = output_labels[i] if i < len(output_labels) else (f"out/{i}", "output")
            outputs.append(Port(value=vid, label=label, role=role))
        self.coverage.effects = sorted(self._effects)
        return inputs, outputs

    # --- equations --------------------------------------------------------------------------------

    def walk(self, jaxpr: Any, env: dict[Any, str], ctx: Context, rec: Walked | None = None) -> None:
        for eqn in jaxpr.eqns:
            self.equation(eqn, env, ctx, rec)

    def equation(self, eqn: Any, env: dict[Any, str], ctx: Context, rec: Walked | None = None) -> None:
        items = ctx.prefix + jaxcompat.name_stack_items(eqn.source_info)
        chain = self.scope_chain(items)
        scope = list(chain[-1]) if chain else []
        transforms = [name for kind, name in items if kind == "transform"]
        group = self.module_group(ctx.group, ctx.base_scope, chain)
        frames = self.frames_of(eqn.source_info)
        source = next((f for f in frames if self.workspace.contains(f.path)), None) or ctx.source
        if not frames:
            frames = ctx.frames
        nid = f"n{len(self.nodes)}"
        inputs = [self.read(env, a) for a in eqn.invars]
        node = Node(
            id=nid,
            primitive=eqn.primitive.name,
            params={},
            inputs=inputs,
            outputs=[],
            scope="/".join(scope),
            group=group,
            source=source,
            frames=frames,
            transforms=transforms,
        )
        self.nodes.append(node)
        for effect in getattr(eqn, "effects", ()) or ():
            self._effects.add(str(effect))

        regions, param_refs = self.regions(eqn, node, inputs, group)
        node.params = self.params(eqn.params, param_refs, nid)
        step = Step(eqn, node, []) if rec is not None else None
        for region in regions:
            sub_env: dict[Any, str] = {}
            for var, const in zip(region.jaxpr.constvars, region.consts or [], strict=False):
                sub_env[var] = self.const_value(var, const)
            fresh: list[int] = []
            for i, var in enumerate(region.jaxpr.invars):
                outer = region.inputs.get(i)
                if outer is None:
                    fresh.append(i)
                sub_env[var] = outer if outer is not None else self.new_value(var.aval)
            sub = Walked(region.jaxpr, region.consts, region.group, sub_env, [], fresh) if step is not None else None
            if step is not None and sub is not None:
                step.regions.append(sub)
            self.walk(region.jaxpr, sub_env, Context(region.group, tuple(scope), items, source, frames), sub)
        if rec is not None and step is not None:
            rec.steps.append(step)
        for var in eqn.outvars:
            vid = self.new_value(var.aval, producer=nid)
            env[var] = vid
            node.outputs.append(vid)

    # --- regions ----------------------------------------------------------------------------------

    def new_group(self, kind: str, parent: str | None, label: str, node: str | None) -> str:
        gid = f"g{len(self.groups)}"
        self.groups.append(Group(id=gid, kind=kind, parent=parent, label=label, node=node))
        return gid

    def regions(
        self, eqn: Any, node: Node, inputs: list[str], parent: str | None
    ) -> tuple[list[Region], dict[int, Any]]:
        """The equation's sub-jaxprs as regions (creating their groups), and param object id -> group ref."""
        found = find_jaxprs(eqn.params)
        if not found:
            return [], {}
        prim = eqn.primitive.name
        params = eqn.params
        refs: dict[int, Any] = {}
        regions: list[Region] = []
        kind = ONE_TO_ONE.get(prim)
        if kind is not None and len(found) == 1:
            _, obj = found[0]
            jaxpr, consts = _open(obj)
            gid = self.new_group(kind, parent, _region_label(kind, params, jaxpr), node.id)
            refs[id(obj)] = {"group": gid}
            one_to_one = len(jaxpr.invars) == len(inputs)
            mapping = dict(enumerate(inputs)) if one_to_one else {}
            regions.append(Region(jaxpr, consts, gid, mapping))
            return regions, refs
        self.coverage.notes = _add_note(self.coverage.notes, prim)
        if prim == "cond":
            branches = params.get("branches", ())
            gid = self.new_group("cond", parent, f"cond ({len(branches)} branches)", node.id)
            for i, branch in enumerate(branches):
                bid = self.new_group("cond_branch", gid, f"branch {i}", node.id)
                refs[id(branch)] = {"group": bid}
                jaxpr, consts = _open(branch)
                ops = inputs[1:]
                mapping = dict(enumerate(ops)) if len(jaxpr.invars) == len(ops) else {}
                regions.append(Region(jaxpr, consts, bid, mapping))
            return regions, refs
        if prim == "while":
            gid = self.new_group("while", parent, "while", node.id)
            cn, bn = int(params.get("cond_nconsts", 0)), int(params.get("body_nconsts", 0))
            cond_obj, body_obj = params.get("cond_jaxpr"), params.get("body_jaxpr")
            cid = self.new_group("while_cond", gid, "cond", node.id)
            bid = self.new_group("while_body", gid, "body", node.id)
            refs[id(cond_obj)] = {"group": cid}
            refs[id(body_obj)] = {"group": bid}
            cj, cc = _open(cond_obj)
            bj, bc = _open(body_obj)
            regions.append(Region(cj, cc, cid, {i: inputs[i] for i in range(min(cn, len(inputs)))}))
            regions.append(Region(bj, bc, bid, {i: inputs[cn + i] for i in range(min(bn, len(inputs) - cn))}))
            return regions, refs
        if prim == "scan":
            obj = params.get("jaxpr")
            length = params.get("length")
            gid = self.new_group("scan", parent, f"scan (length {length})", node.id)
            refs[id(obj)] = {"group": gid}
            jaxpr, consts = _open(obj)
            nc = int(params.get("num_consts", 0))
            regions.append(Region(jaxpr, consts, gid, {i: inputs[i] for i in range(min(nc, len(inputs)))}))
            return regions, refs
        # shard_map, custom_linear_solve and any other higher-order primitive: generic regions
        kind = {"shard_map": "shard_map", "custom_linear_solve": "custom_linear_solve"}.get(prim, prim)
        name = params.get("name")
        label = f"{prim}({name})" if isinstance(name, str) else prim
        gid = self.new_group(kind, parent, label, node.id)
        for label_, obj in found:
            jaxpr, consts = _open(obj)
            rid = gid if len(found) == 1 else self.new_group("region", gid, label_, node.id)
            refs[id(obj)] = {"group": rid}
            regions.append(Region(jaxpr, consts, rid, {}))
        return regions, refs

    # --- scopes and frames ------------------------------------------------------------------------

    def scope_chain(self, items: list[tuple[str, str]]) -> list[tuple[str, ...]]:
        """The nesting of module scopes, outermost first, each level a full path.

        ``stack`` mode: every Scope item is a level (``MLP`` > ``MLP/Dense_0``), and a worker's
        scope (a module argument of a function) restarts at its full path and ends the plain ones
        (equinox's own ``eqx.nn.Linear`` scopes inside it say nothing more). ``marked`` mode: only
        the worker's own scopes, each a full attribute path (``blocks/0`` > ``blocks/0/attn``).
        """
        chain: list[tuple[str, ...]] = []
        if self.scope_mode == "marked":
            for kind, name in items:
                if kind == "scope" and name.startswith(SCOPE_MARK):
                    chain.append(tuple(p for p in name[len(SCOPE_MARK) :].split("/") if p))
            return chain
        path: tuple[str, ...] = ()
        marked = False
        for kind, name in items:
            if kind != "scope":
                continue
            if name.startswith(SCOPE_MARK):  # a module argument's call: its full path
                path = tuple(p for p in name[len(SCOPE_MARK) :].split("/") if p)
                marked = True
            elif marked:
                continue  # inside a module call, as for module targets, only module paths count
            else:
                path = (*path, name)
            chain.append(path)
        return chain

    def module_group(self, region: str | None, base: tuple[str, ...], chain: list[tuple[str, ...]]) -> str | None:
        """The innermost module group of ``chain`` inside ``region`` (created on first use).

        Levels the enclosing equation already had (``base``) belong to groups outside the region.
        """
        gid = region
        previous = base
        for level in chain:
            if len(level) <= len(base) and base[: len(level)] == level:
                continue
            key = (region, level)
            found = self._module_groups.get(key)
            if found is None:
                relative = level[len(previous) :] if level[: len(previous)] == previous else level
                found = self.new_group("module", gid, "/".join(relative or level), None)
                self._module_groups[key] = found
            gid = found
            previous = level
        return gid

    def frames_of(self, source_info: Any) -> list[Frame]:
        out: list[Frame] = []
        for raw in jaxcompat.user_frames(source_info):
            frame = self._frames.get(raw)
            if frame is None:
                frame = Frame(
                    path=raw.file,
                    line=raw.line,
                    column=code_points(raw.file, raw.line, raw.column),
                    end_line=raw.end_line,
                    end_column=code_points(raw.file, raw.end_line, raw.end_column),
                    function=raw.function or None,
                )
                self._frames[raw] = frame
                if self.workspace.contains(raw.file):
                    self.frame_files.add(os.path.realpath(raw.file))
            out.append(frame)
        return out

    # --- params -----------------------------------------------------------------------------------

    def params(self, params: dict[str, Any], refs: dict[int, Any], nid: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in params.items():
            reasons: list[str] = []
            out[str(key)] = jsonable(value, refs, reasons, str(key))
            for reason in reasons:
                self.coverage.opaque.append({"node": nid, "reason": reason})
                self.coverage.complete = False
        return out


def _add_note(notes: list[str], prim: str) -> list[str]:
    if prim in ("cond", "while", "scan") and CONTROL_FLOW_NOTE not in notes:
        return [*notes, CONTROL_FLOW_NOTE]
    return notes


def _region_label(kind: str, params: dict[str, Any], jaxpr: Any) -> str:
    name = params.get("name")
    if not isinstance(name, str):
        name = _func_name(jaxpr)
    if kind == "remat":
        return "remat" if not isinstance(name, str) else f"remat({name})"
    if isinstance(name, str):
        return f"{kind}({name})"
    return kind


def _func_name(jaxpr: Any) -> str | None:
    """The traced function's name from a jaxpr's debug info (``relu at /path:12`` -> ``relu``)."""
    info = getattr(jaxpr, "debug_info", None)
    name = getattr(info, "func_name", None)
    if isinstance(name, str) and name:
        return name
    src = getattr(info, "func_src_info", None)
    if isinstance(src, str) and src:
        head = src.split(" at ", 1)[0].strip()
        return head or None
    return None


def is_literal(atom: Any) -> bool:
    return type(atom).__name__ == "Literal" and hasattr(atom, "val")


def _is_jaxpr(obj: Any) -> bool:
    return type(obj).__name__ in ("Jaxpr", "ClosedJaxpr") and hasattr(
        obj, "eqns" if type(obj).__name__ == "Jaxpr" else "jaxpr"
    )


def _open(obj: Any) -> tuple[Any, list[Any] | None]:
    if type(obj).__name__ == "ClosedJaxpr":
        return obj.jaxpr, list(obj.consts)
    return obj, None


def find_jaxprs(params: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every Jaxpr / ClosedJaxpr in the params (through tuples, lists and named tuples), labelled."""
    found: list[tuple[str, Any]] = []

    def visit(label: str, value: Any, depth: int) -> None:
        if _is_jaxpr(value):
            found.append((label, value))
        elif depth < 3 and isinstance(value, tuple | list):
            fields = getattr(value, "_fields", None)
            for i, item in enumerate(value):
                visit(str(fields[i]) if fields else f"{label} {i}", item, depth + 1)

    for key, value in params.items():
        visit(str(key), value, 0)
    return found


def _dim(d: Any) -> int | str:
    try:
        return operator.index(d)
    except TypeError:
        return str(d)


def small_array(value: Any) -> Any:
    """A JSON-safe inline form of a small constant; None when large or not numeric."""
    try:
        import numpy as np

        dtype = getattr(value, "dtype", None)
        if dtype is not None and "key" in str(dtype):
            return None
        arr = np.asarray(value)
        if arr.size > INLINE_LIMIT or arr.dtype.kind not in "biufc":
            return None
        return _finite(arr.tolist())
    except Exception:
        return None


def _finite(x: Any) -> Any:
    if isinstance(x, complex):
        return [_finite(x.real), _finite(x.imag)]
    if isinstance(x, list):
        return [_finite(i) for i in x]
    return x


def jsonable(value: Any, refs: dict[int, Any], reasons: list[str], where: str, depth: int = 0) -> Any:
    """A JSON-safe form of an equation param; unknown objects become ``{"opaque": repr}``."""
    if id(value) in refs:
        return refs[id(value)]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value
    if depth > 6:
        return {"repr": repr(value)[:200]}
    tname = type(value).__name__
    if _is_jaxpr(value):
        return {"jaxpr": str(len(getattr(value, "eqns", getattr(getattr(value, "jaxpr", None), "eqns", ()))))}
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if tname == "PRNGImpl" and hasattr(value, "key_shape"):
        # the PRNG implementation of random_seed / random_wrap (threefry, rbg): its fields are jax's own
        # functions, not opaque user code
        return {"type": tname, "name": str(getattr(value, "name", "")), "tag": str(getattr(value, "tag", ""))}
    if isinstance(value, tuple | list):
        fields = getattr(value, "_fields", None)
        if fields:
            return {
                str(f): jsonable(v, refs, reasons, f"{where}.{f}", depth + 1)
                for f, v in zip(fields, value, strict=False)
            }
        return [jsonable(v, refs, reasons, where, depth + 1) for v in value]
    if isinstance(value, frozenset | set):
        return sorted(str(v) for v in value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, refs, reasons, f"{where}.{k}", depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name, None), refs, reasons, f"{where}.{f.name}", depth + 1)
            for f in dataclasses.fields(value)
        }
    module = type(value).__module__ or ""
    if tname.endswith("DType") or tname == "dtype" or (module.startswith("numpy") and hasattr(value, "kind")):
        return str(value)
    if isinstance(value, type):
        return getattr(value, "__name__", str(value))
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        inline = small_array(value)
        if inline is not None:
            return inline
        return {"shape": [_dim(d) for d in value.shape], "dtype": str(value.dtype)}
    if tname == "PyTreeDef" and len(text := str(value)) <= 2000:  # a structure its text spells out whole
        return {"treedef": text}
    if tname in ("UnspecifiedValue", "AUTO") or tname.endswith(("Sharding", "Mesh", "Layout", "Format", "Spec")):
        return {"type": tname, "repr": repr(value)[:200]}
    if where.split(".")[0] in _RULE_PARAMS:
        return {"callable": getattr(value, "__name__", tname)}
    if hasattr(value, "item") and not hasattr(value, "shape"):
        try:
            return _finite(value.item())
        except Exception:
            pass
    reasons.append(f"param {where}: {tname}")
    return {"opaque": repr(value)[:200]}
