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
import operator
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, SupportsIndex, TypeAlias, cast

from jaxlsp.graph.model import Coverage, Frame, Group, Node, Port, Value
from jaxlsp.worker.core.failures import Workspace, code_points
from jaxlsp.worker.core.paths import Spelling, is_own
from jaxlsp.worker.protocol import Json
from jaxlsp.worker.tracing import jaxcompat
from jaxlsp.worker.tracing.params import (
    dim,
    is_jaxpr,
    jsonable,
    mesh_axes,
    small_array,
    value_sharding,
)
from jaxlsp.worker.tracing.scopes import SCOPE_MARK

if TYPE_CHECKING:
    from jax.core import AbstractValue, ShapedArray
    from jax.extend import core as jex
    from typing_extensions import TypeIs

    #: An equation's operand: a variable or a literal.
    Atom: TypeAlias = jex.Var | jex.Literal

#: A value's sharding as the graph keeps it, and its mesh (:func:`.params.value_sharding`).
_Sharded: TypeAlias = "tuple[dict[str, Json] | None, dict[str, Json] | None]"

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
# Primitives whose computation is outside the graph: the opaque regions of coverage.
OPAQUE_PRIMITIVES = {
    "pure_callback": "pure_callback: calls back into Python; what it computes is not in the graph",
    "io_callback": "io_callback: calls back into Python; what it computes is not in the graph",
    "callback": "callback: calls back into Python; what it computes is not in the graph",
    "ffi_call": "ffi_call: a foreign (C++/CUDA) function; what it computes is not in the graph",
    "custom_call": "custom_call: an XLA custom call; what it computes is not in the graph",
}
# Params that hold a sub-program: one that is not a jaxpr the walk can enter is an opaque region.
_BODY_PARAMS = frozenset(
    {"jaxpr", "call_jaxpr", "fun_jaxpr", "body_jaxpr", "cond_jaxpr", "branches", "jaxprs", "kernel_jaxpr"}
)
_EFFECT_NAMES = {
    "DebugEffect": "debug_callback",
    "OrderedDebugEffect": "debug_callback (ordered)",
    "IOEffect": "io_callback",
    "OrderedIOEffect": "io_callback (ordered)",
}
_EFFECT_NOTES = {
    "debug_callback": "debug_callback (jax.debug.print, jax.debug.callback) runs at run time and returns nothing "
    "the program uses: a note, not a gap",
    "named_axis": "named axes (pmap, shard_map, vmap with axis_name): collectives over them are traced once, "
    "as each device runs them",
}


def effect_name(effect: object) -> str:
    """A stable name for a jaxpr effect: ``debug_callback``, ``io_callback``, ``named_axis(i)``."""
    tname = type(effect).__name__
    if tname == "NamedAxisEffect":
        return f"named_axis({getattr(effect, 'name', '?')})"
    return _EFFECT_NAMES.get(tname, str(effect))


# Primitives whose body runs once per device, on per-device shapes (jax.pmap traces as shard_map).
MANUAL_PRIMITIVES = frozenset({"shard_map", "xla_pmap"})
# Scopes JAX pushes itself, which are no module (the recomputation of a ``jax.checkpoint`` body in
# the backward pass), and the transform each is recorded as.
_INTERNAL_SCOPES = {"rematted_computation": "remat"}


@dataclass
class Region:
    jaxpr: jex.Jaxpr  # an open Jaxpr
    consts: list[object] | None  # a ClosedJaxpr's consts
    group: str  # the group its nodes belong to
    inputs: dict[int, str]  # invar index -> outer value id


@dataclass
class Step:
    """One equation as walked: what a values run evaluates (``values/interpret.py``)."""

    eqn: jex.JaxprEqn
    node: Node
    regions: list[Walked]  # the equation's regions in the order the builder made them


@dataclass
class Walked:
    """One walk of a jaxpr (a region at one call site): its variables' value ids and its steps.

    ``fresh`` lists the invars that got values of their own (loop carries, slices of scanned
    arrays), by index; the others read the enclosing values directly."""

    jaxpr: jex.Jaxpr
    consts: list[object] | None
    group: str | None
    env: dict[jex.Var, str]
    steps: list[Step]
    fresh: list[int]


@dataclass
class Context:
    group: str | None
    base_scope: tuple[str, ...]
    prefix: list[tuple[str, str]]  # the enclosing name-stack items
    source: Frame | None
    frames: list[Frame]
    # name-stack items -> what the equations under them share (``Placement``): a layer's
    # equations repeat a few name stacks thousands of times
    placements: dict[tuple[tuple[str, str], ...], Placement] = dataclasses.field(default_factory=dict)
    # id of a jax name stack -> (it, its placement): the equations traced under one stack share
    # the object. By identity, the stack kept alive: jax's ``Scope("vmap")`` equals its
    # ``Transform("vmap")`` (both one-field named tuples), so equal stacks may differ in kind.
    by_stack: dict[int, tuple[object, Placement]] = dataclasses.field(default_factory=dict)


@dataclass
class Placement:
    """Where the equations of one name stack go, within one walk: their name-stack items (the
    prefix of sub-walks), their module path, transforms and module group."""

    items: list[tuple[str, str]]
    scope: list[str]
    transforms: list[str]
    group: str | None
    scope_text: str  # ``scope`` joined with "/"


class GraphBuilder:
    def __init__(
        self,
        workspace: Workspace,
        scope_mode: str = "stack",
        spelling: Spelling | None = None,
        keep_equations: bool = False,
        record: bool = False,
    ):
        self.workspace = workspace
        self.record = record  # keep the walk (``self.walked``) for a values run
        self.walked: Walked | None = None
        self.spelling = spelling if spelling is not None else Spelling(workspace.root, workspace)
        self.scope_mode = scope_mode
        self.nodes: list[Node] = []
        # with keep_equations, eqns[i] is node i's equation (the costs are measured on them)
        self.keep_equations = keep_equations
        self.eqns: list[jex.JaxprEqn] = []
        self.values: list[Value] = []
        self.groups: list[Group] = []
        self.coverage = Coverage()
        self.frame_files: set[str] = set()
        self._frames: dict[jaxcompat.RawFrame, Frame | None] = {}  # None: a frame of jaxlsp itself
        self._workspace_frames: set[int] = set()  # ids of the frames in workspace files
        # id of a list of raw frames -> (it, its frames, the innermost workspace frame)
        self._frame_lists: dict[int, tuple[list[jaxcompat.RawFrame], list[Frame], Frame | None]] = {}
        # id of an equation's params -> (them, their JSON form): the equations of an inlined jit
        # body share their body's params (10,015 equations of an unrolled LM: 3,291 distinct)
        self._params: dict[int, tuple[dict[str, object], dict[str, Json]]] = {}
        self._module_groups: dict[tuple[str | None, tuple[str, ...]], str] = {}
        self._effects: set[str] = set()
        self._dtypes: dict[object, str] = {}
        # id -> (aval, its type's parts)
        self._avals: dict[int, tuple[AbstractValue, list[int | str], str, bool, _Sharded | None]] = {}
        self._manual = 0  # > 0 while walking a shard_map (pmap) body: values there are per device
        # (jax sharding, manual axes) -> (the value's sharding, its mesh): a few distinct per program
        self._shardings: dict[tuple[object, object], _Sharded] = {}
        # The mesh the values' shardings name: the first seen outside a shard_map body (where its
        # axes are Manual), else the first seen at all; None when no value has one.
        self.mesh: dict[str, Json] | None = None
        self._mesh_manual = False

    # --- values ---------------------------------------------------------------------------------

    def new_value(
        self, aval: AbstractValue, producer: str | None = None, kind: str = "var", literal: Json = None
    ) -> str:
        vid = f"v{len(self.values)}"
        seen = self._avals.get(id(aval))
        if seen is not None and seen[0] is aval:
            _, shape, name, weak, found = seen
        else:
            shape, name, weak, found = self._typed(aval)
            # ``aval`` kept: its id stays its own. Equations a replay staged share their avals, and
            # the values of one type share one shape list, which nothing changes once made.
            self._avals[id(aval)] = (aval, shape, name, weak, found)
        sharding = None
        if found is not None:
            sharding, mesh = found
            if mesh is not None and (self.mesh is None or (self._mesh_manual and not self._manual)):
                self.mesh, self._mesh_manual = mesh, self._manual > 0
        self.values.append(
            Value(
                id=vid,
                shape=shape,
                dtype=name,
                weak_type=weak,
                producer=producer,
                literal=literal,
                kind=kind,
                per_device=self._manual > 0,
                sharding=sharding,
            )
        )
        return vid

    def _typed(self, aval: AbstractValue) -> tuple[list[int | str], str, bool, _Sharded | None]:
        """A value type's shape, dtype name, weak type, and sharding with its mesh (or None)."""
        dims = getattr(aval, "shape", ())
        shape: list[int | str]
        try:  # every dimension a number: one C-level pass
            shape = list(map(operator.index, cast("Iterable[SupportsIndex]", dims)))
        except TypeError:  # a symbolic dimension among them, spelled as text
            shape = [dim(d) for d in dims]
        dtype = getattr(aval, "dtype", None)
        name = self._dtypes.get(dtype) if dtype is not None else None
        if name is None:
            name = str(dtype) if dtype is not None else type(aval).__name__.replace("Abstract", "").lower()
            if dtype is not None:
                self._dtypes[dtype] = name
        found = None
        jax_sharding = getattr(aval, "sharding", None)
        if jax_sharding is not None:
            key = (jax_sharding, getattr(aval, "mat", None))
            found = self._shardings.get(key)
            if found is None:
                found = self._shardings[key] = value_sharding(aval, len(shape))
        return shape, name, bool(cast("ShapedArray", aval).weak_type), found

    def value(self, vid: str) -> Value:
        return self.values[int(vid[1:])]

    def literal_value(self, lit: jex.Literal) -> str:
        return self.new_value(lit.aval, kind="literal", literal=small_array(lit.val))

    def const_value(self, var: jex.Var, const: object) -> str:
        return self.new_value(var.aval, kind="const", literal=small_array(const))

    def read(self, env: dict[jex.Var, str], atom: Atom) -> str:
        if is_literal(atom):
            return self.literal_value(atom)
        vid = env.get(atom)
        if vid is None:
            vid = self.new_value(atom.aval)
            env[atom] = vid
        return vid

    # --- entry ------------------------------------------------------------------------------------

    def build(
        self, closed: jex.ClosedJaxpr, input_labels: list[tuple[str, str]], output_labels: list[tuple[str, str]]
    ) -> tuple[list[Port], list[Port]]:
        jaxpr = closed.jaxpr
        env: dict[jex.Var, str] = {}
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

    def walk(self, jaxpr: jex.Jaxpr, env: dict[jex.Var, str], ctx: Context, rec: Walked | None = None) -> None:
        for eqn in jaxpr.eqns:
            self.equation(eqn, env, ctx, rec)

    def placement(self, source_info: object, ctx: Context) -> Placement:
        """Where an equation goes, found once per name stack and walk (``Context.placements``):
        equal name stacks give equal items, chains and groups (a group is made on first use)."""
        stack = getattr(source_info, "name_stack", None)
        seen = ctx.by_stack.get(id(stack))
        if seen is not None and seen[0] is stack:
            return seen[1]
        items = ctx.prefix + jaxcompat.name_stack_items(source_info)
        key = tuple(items)
        found = ctx.placements.get(key)
        if found is None:
            chain = self.scope_chain(items)
            # JAX's own scope around a checkpoint's recomputation is kept as the ``remat`` transform
            transforms = [
                name if kind == "transform" else _INTERNAL_SCOPES[name]
                for kind, name in items
                if kind == "transform" or name in _INTERNAL_SCOPES
            ]
            scope = list(chain[-1]) if chain else []
            group = self.module_group(ctx.group, ctx.base_scope, chain)
            found = ctx.placements[key] = Placement(items, scope, transforms, group, "/".join(scope))
        if stack is not None:
            ctx.by_stack[id(stack)] = (stack, found)
        return found

    def equation(self, eqn: jex.JaxprEqn, env: dict[jex.Var, str], ctx: Context, rec: Walked | None = None) -> None:
        place = self.placement(eqn.source_info, ctx)
        items, scope, group = place.items, place.scope, place.group
        frames, innermost = self.frames_of(eqn.source_info)
        source = innermost or ctx.source
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
            scope=place.scope_text,
            group=group,
            source=source,
            frames=frames,
            transforms=list(place.transforms),
        )
        self.nodes.append(node)
        if self.keep_equations:
            self.eqns.append(eqn)
        for effect in getattr(eqn, "effects", ()) or ():
            self.effect(effect)

        before = len(self.groups)
        regions, param_refs = self.regions(eqn, node, inputs, group)
        node.params = self.params(eqn.params, param_refs, nid)
        self.opaque(eqn, nid, bool(regions))
        if len(self.groups) > before:
            # The equation sits inside the region it owns: a call and its body are one box at the
            # parent's level (not a jit node beside its jit(f) group), and the region's results,
            # which are this node's outputs, leave that box.
            node.group = self.groups[before].id
        manual = eqn.primitive.name in MANUAL_PRIMITIVES
        bodies: list[tuple[Region, dict[jex.Var, str]]] = []
        step = Step(eqn, node, []) if rec is not None else None
        for region in regions:
            sub_env: dict[jex.Var, str] = {}
            fresh: list[int] = []
            self._manual += manual
            try:
                for var, const in zip(region.jaxpr.constvars, region.consts or [], strict=False):
                    sub_env[var] = self.const_value(var, const)
                for i, var in enumerate(region.jaxpr.invars):
                    outer = region.inputs.get(i)
                    if outer is None:
                        fresh.append(i)
                    sub_env[var] = outer if outer is not None else self.new_value(var.aval)
                    if manual and outer is None and i < len(inputs):
                        self.value(sub_env[var]).global_shape = list(self.value(inputs[i]).shape)
                sub = Walked(region.jaxpr, region.consts, region.group, sub_env, [], fresh) if step else None
                if step is not None and sub is not None:
                    step.regions.append(sub)
                self.walk(region.jaxpr, sub_env, Context(region.group, tuple(scope), items, source, frames), sub)
            finally:
                self._manual -= manual
            bodies.append((region, sub_env))
        if rec is not None and step is not None:
            rec.steps.append(step)
        for var in eqn.outvars:
            vid = self.new_value(var.aval, producer=nid)
            env[var] = vid
            node.outputs.append(vid)
        if manual:  # a shard_map body's results are one device's part of the node's outputs
            for region, sub_env in bodies:
                for j, atom in enumerate(region.jaxpr.outvars):
                    body_vid = None if is_literal(atom) else sub_env.get(atom)
                    if body_vid is not None and j < len(node.outputs):
                        self.value(body_vid).global_shape = list(self.value(node.outputs[j]).shape)

    def effect(self, effect: object) -> None:
        """Name an effect once, and say in the notes what it means for the graph (effects are not
        gaps: a debug print computes nothing the program uses)."""
        name = effect_name(effect)
        if name in self._effects:
            return
        self._effects.add(name)
        note = _EFFECT_NOTES.get(name.split("(")[0].split(" ")[0])
        if note is not None and note not in self.coverage.notes:
            self.coverage.notes.append(note)

    # --- regions ----------------------------------------------------------------------------------

    def new_group(self, kind: str, parent: str | None, label: str, node: str | None) -> str:
        gid = f"g{len(self.groups)}"
        self.groups.append(Group(id=gid, kind=kind, parent=parent, label=label, node=node))
        return gid

    def regions(
        self, eqn: jex.JaxprEqn, node: Node, inputs: list[str], parent: str | None
    ) -> tuple[list[Region], dict[int, Json]]:
        """The equation's sub-jaxprs as regions (creating their groups), and param object id -> group ref."""
        found = find_jaxprs(eqn.params)
        if not found:
            return [], {}
        prim = eqn.primitive.name
        params = eqn.params
        refs: dict[int, Json] = {}
        regions: list[Region] = []
        kind = ONE_TO_ONE.get(prim)
        if kind is not None and len(found) == 1:
            _, obj = found[0]
            jaxpr, consts = _open(obj)
            label = _region_label(kind, params, jaxpr)
            axes = _pmap_axes(jaxpr) if kind == "jit" else None
            if axes is not None:  # jax.pmap: a jit of a shard_map over its own one-axis mesh
                kind, label = "pmap", f"pmap({axes})"
            gid = self.new_group(kind, parent, label, node.id)
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
            scan_obj = params.get("jaxpr")
            length = params.get("length")
            gid = self.new_group("scan", parent, f"scan (length {length})", node.id)
            refs[id(scan_obj)] = {"group": gid}
            jaxpr, consts = _open(scan_obj)
            nc = int(params.get("num_consts", 0))
            regions.append(Region(jaxpr, consts, gid, {i: inputs[i] for i in range(min(nc, len(inputs)))}))
            return regions, refs
        # shard_map, custom_linear_solve and any other higher-order primitive: generic regions
        kind = {"shard_map": "shard_map", "custom_linear_solve": "custom_linear_solve"}.get(prim, prim)
        name = params.get("name")
        label = f"{prim}({name})" if isinstance(name, str) else prim
        mesh = mesh_axes(params.get("mesh"))
        if mesh:
            label = f"{prim}({_axes_text(mesh)})"
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
        restated: int | None = None  # how much of ``path`` a transform's stack has restated so far
        for kind, name in items:
            if kind != "scope":
                if path:
                    restated = 0
                continue
            if name in _INTERNAL_SCOPES:
                continue
            if restated is not None and not marked:
                # A backward equation's stack holds its forward equation's stack again after the
                # transpose's (``transpose(jvp(MLP))/jvp(MLP)``): the restated prefix is the same
                # module, not ``MLP/MLP``. A name that does not restate it nests as usual
                # (``jvp(M)/vmap(vd)`` is ``M/vd``).
                if restated < len(path) and path[restated] == name:
                    restated += 1
                    continue
                if restated:
                    path = path[:restated]
                restated = None
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

    def frames_of(self, source_info: object) -> tuple[list[Frame], Frame | None]:
        """The equation's user frames, innermost first, their paths spelled for the graph
        (worker/core/paths.py), and the innermost in the workspace; jaxlsp's own frames (the worker's
        wrappers) are left out. Equations with equal tracebacks share one list (jaxcompat gives
        them one list of raw frames), which nothing changes once made."""
        raws = jaxcompat.user_frames(source_info)
        seen = self._frame_lists.get(id(raws))
        if seen is not None and seen[0] is raws:
            return seen[1], seen[2]
        out: list[Frame] = []
        for raw in raws:
            if raw in self._frames:
                frame = self._frames[raw]
            else:
                frame = self._frames[raw] = self._frame(raw)
            if frame is not None:
                out.append(frame)
        innermost = next((f for f in out if id(f) in self._workspace_frames), None)
        self._frame_lists[id(raws)] = (raws, out, innermost)  # ``raws`` kept: its id stays its own
        return out, innermost

    def _frame(self, raw: jaxcompat.RawFrame) -> Frame | None:
        if is_own(raw.file):
            return None
        path, package = self.spelling.spell(raw.file)
        frame = Frame(
            path=path,
            line=raw.line,
            column=code_points(raw.file, raw.line, raw.column),
            end_line=raw.end_line,
            end_column=code_points(raw.file, raw.end_line, raw.end_column),
            function=raw.function or None,
            package=package,
        )
        found = self.workspace.in_cell(raw.file, raw.line) if self.workspace.notebooks else None
        if found is not None:  # a notebook's module line: the cell, and the line within it
            frame.cell, frame.line = found
            frame.end_line = raw.end_line - raw.line + frame.line
        if self.workspace.contains(raw.file):
            self.frame_files.add(os.path.realpath(raw.file))
            self._workspace_frames.add(id(frame))
        return frame

    # --- params -----------------------------------------------------------------------------------

    def params(self, params: dict[str, object], refs: dict[int, Json], nid: str) -> dict[str, Json]:
        """The JSON form of an equation's params; equations with the very same params (no
        sub-jaxpr among them, whose group refs are the equation's own) share one, which nothing
        changes once made."""
        if refs:
            return {str(key): jsonable(value, refs, str(key)) for key, value in params.items()}
        seen = self._params.get(id(params))
        if seen is not None and seen[0] is params:
            return seen[1]
        made = {str(key): jsonable(value, refs, str(key)) for key, value in params.items()}
        self._params[id(params)] = (params, made)  # ``params`` kept: its id stays its own
        return made

    def opaque(self, eqn: jex.JaxprEqn, nid: str, walked: bool) -> None:
        """Record the equation as an opaque region when its inside is not in the graph: a call back
        into Python or a foreign function, or a sub-program held in a form the capture cannot walk."""
        prim = eqn.primitive.name
        reason = OPAQUE_PRIMITIVES.get(prim)
        if reason is None and not walked:
            held = [k for k, v in eqn.params.items() if k in _BODY_PARAMS and v is not None and not find_jaxprs({k: v})]
            if held:
                reason = f"{prim}: its sub-program ({', '.join(held)}) is not a jaxpr the capture can walk"
        if reason is not None:
            self.coverage.opaque.append({"node": nid, "reason": reason})
            self.coverage.complete = False


_PASS_THROUGH = frozenset({"jit", "pjit", "closed_call", "core_call", "remat2", "checkpoint"})


def forwarded_outputs(closed: jex.ClosedJaxpr) -> set[int]:
    """Indices of the program's results that are one of its inputs passed through unchanged,
    directly or out of ``jit`` calls (``nnx.jit`` returns every Variable of the model, changed or
    not): an in-place update that wrote the value it read is no update."""
    jaxpr = closed.jaxpr
    cache: dict[int, tuple[dict[int, int], dict[int, tuple[jex.JaxprEqn, int]]]] = {}
    return {i for i, atom in enumerate(jaxpr.outvars) if _forwarded_input(jaxpr, atom, 0, cache) is not None}


def _forwarded_input(
    jaxpr: jex.Jaxpr,
    atom: Atom,
    depth: int,
    cache: dict[int, tuple[dict[int, int], dict[int, tuple[jex.JaxprEqn, int]]]],
) -> int | None:
    """The index of the input of ``jaxpr`` that ``atom`` (one of its values) is, else None.
    ``cache`` keeps each jaxpr's input positions and producers (by variable identity)."""
    if depth > 32 or is_literal(atom):
        return None
    found = cache.get(id(jaxpr))
    if found is None:
        positions = {id(v): i for i, v in enumerate(jaxpr.invars)}
        producers = {id(v): (e, i) for e in jaxpr.eqns for i, v in enumerate(e.outvars)}
        found = cache[id(jaxpr)] = (positions, producers)
    positions, producers = found
    if id(atom) in positions:
        return positions[id(atom)]
    produced = producers.get(id(atom))
    if produced is None:
        return None
    eqn, index = produced
    inner_obj = eqn.params.get("jaxpr") if eqn.primitive.name in _PASS_THROUGH else None
    if inner_obj is None or not is_jaxpr(inner_obj):
        return None
    inner, _ = _open(inner_obj)
    if index >= len(inner.outvars) or len(inner.invars) != len(eqn.invars):
        return None
    j = _forwarded_input(inner, inner.outvars[index], depth + 1, cache)
    if j is None or is_literal(eqn.invars[j]):
        return None
    return _forwarded_input(jaxpr, eqn.invars[j], depth + 1, cache)


def _add_note(notes: list[str], prim: str) -> list[str]:
    if prim in ("cond", "while", "scan") and CONTROL_FLOW_NOTE not in notes:
        return [*notes, CONTROL_FLOW_NOTE]
    return notes


def _axes_text(axes: list[tuple[str, int]]) -> str:
    return ", ".join(f"{name}: {size}" for name, size in axes)


def _pmap_axes(jaxpr: jex.Jaxpr) -> str | None:
    """``i: 2`` when ``jaxpr`` (a jit's body) is how ``jax.pmap`` traces: a jit of a function made
    in jax's own pmap.py holding a ``shard_map`` over the mapped axis; else None."""
    src = str(getattr(getattr(jaxpr, "debug_info", None), "func_src_info", "") or "")
    if not src.replace("\\", "/").rstrip("0123456789:").endswith("jax/_src/pmap.py"):
        return None
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "shard_map":
            axes = mesh_axes(eqn.params.get("mesh"))
            if axes:
                return _axes_text(axes)
    return None


def _region_label(kind: str, params: dict[str, object], jaxpr: jex.Jaxpr) -> str:
    name = params.get("name")
    if not isinstance(name, str):
        name = _func_name(jaxpr)
    if kind == "remat":
        return "remat" if not isinstance(name, str) else f"remat({name})"
    if isinstance(name, str):
        return f"{kind}({name})"
    return kind


def _func_name(jaxpr: jex.Jaxpr) -> str | None:
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


def is_literal(atom: object) -> TypeIs[jex.Literal]:
    return type(atom).__name__ == "Literal" and hasattr(atom, "val")


def _open(obj: object) -> tuple[jex.Jaxpr, list[object] | None]:
    """A sub-jaxpr param (:func:`find_jaxprs`' or one :func:`.params.is_jaxpr` holds) opened."""
    if type(obj).__name__ == "ClosedJaxpr":
        closed = cast("jex.ClosedJaxpr", obj)
        return closed.jaxpr, list(closed.consts)
    return cast("jex.Jaxpr", obj), None


_LEAF, _JAXPR, _SEQUENCE = 0, 1, 2
_PARAM_KINDS: dict[type, int] = {}  # a param value's type -> what it can hold, decided once per type


def _param_kind(t: type) -> int:
    kind = _PARAM_KINDS.get(t)
    if kind is None:
        if t.__name__ in ("Jaxpr", "ClosedJaxpr"):
            kind = _JAXPR
        elif issubclass(t, tuple | list):
            kind = _SEQUENCE
        else:
            kind = _LEAF
        _PARAM_KINDS[t] = kind
    return kind


def find_jaxprs(params: Mapping[str, object]) -> list[tuple[str, jex.Jaxpr | jex.ClosedJaxpr]]:
    """Every Jaxpr / ClosedJaxpr in the params (through tuples, lists and named tuples), labelled.

    Called for every equation (by the limits' count and by the walk): the types of the values
    that can hold no jaxpr (ints, strings, dtypes, shardings) are skipped by a lookup, which made
    it 4x faster than testing each value."""
    found: list[tuple[str, jex.Jaxpr | jex.ClosedJaxpr]] = []
    for key, value in params.items():
        kind = _param_kind(type(value))
        if kind != _LEAF:
            _visit(found, str(key), value, 0, kind)
    return found


def _visit(
    found: list[tuple[str, jex.Jaxpr | jex.ClosedJaxpr]], label: str, value: object, depth: int, kind: int
) -> None:
    if kind == _JAXPR:
        if is_jaxpr(value):
            found.append((label, value))
        return
    if depth >= 3:
        return
    fields = getattr(value, "_fields", None)
    for i, item in enumerate(cast("Iterable[object]", value)):  # a tuple or a list (_SEQUENCE)
        sub = _param_kind(type(item))
        if sub != _LEAF:
            _visit(found, str(fields[i]) if fields else f"{label} {i}", item, depth + 1, sub)
