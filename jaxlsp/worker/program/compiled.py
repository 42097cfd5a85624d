"""The compiled program (``jaxlsp trace --compiled``): lower and compile the traced program for the
profile's devices and read what XLA made of it back onto the graph (runs in the user's
interpreter, after the graph is built).

The traced function is lowered under ``jax.jit`` on the operands it was traced with (abstract
arrays with the sharding each carries: a factory's sharded ``ShapeDtypeStruct``, an initialised
model's sharded arrays), which reuses the trace JAX cached, so the HLO's metadata points at the
user's lines; then ``compile()`` on the profile's device: the CPU (with
``devices = N`` virtual devices) or ``cuda:N``. From the optimised HLO (``compiled.as_text()``,
read by :mod:`.hlo`) come the collectives XLA inserted, the fusions, each value's per-device shape,
and the peak of the compiled schedule; from XLA's analyses the per-device costs and memory. The
section's format is in docs/graph-format.md ("Compiled"); ``jaxlsp.graph.compiled`` renders it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict, cast

from jaxlsp.graph.costs import common_scope
from jaxlsp.graph.model import Graph, Node
from jaxlsp.worker import topology as topologies
from jaxlsp.worker.program import fit, hlo, hlomap

if TYPE_CHECKING:
    from typing import NotRequired  # Python 3.11: the worker also runs on 3.10

    import jax
    from jax.core import ShapedArray
    from jax.extend.core import ClosedJaxpr
    from jax.sharding import Mesh, Sharding
    from jax.stages import Compiled, Lowered

    from jaxlsp.worker.loading.targets import Traceable

FUSION_LIMIT = 5000  # fusions listed (a 12-layer transformer's gradient has about 600)


def measure(
    graph: Graph,
    closed: ClosedJaxpr,
    traced: Traceable,
    device: jax.Device | None,
    platform: str,
    spell: Callable[[str], str],
    topology: str | None = None,
) -> None:
    """Fill ``graph.compiled``. ``traced``: what was traced (``fn`` and its ``operands``);
    ``device``: the jax device to compile for (None: the default); ``spell``: absolute path -> the
    graph's spelling of it (for frames XLA names that no node has). A failure to lower or compile
    is kept as ``error`` (the graph itself stands). ``topology``: a TPU pod's name (the profile's
    mesh is over its devices, worker/tracing/topology.py): operands the profile left unsharded are
    replicated over it, and the section says whether the program fits a chip (:mod:`.fit`)."""
    import jax

    section: dict[str, object] = {"platform": platform}
    graph.compiled = section
    started = time.perf_counter()
    leaves = jax.tree_util.tree_leaves(traced.operands)
    pod_mesh = _pod_mesh() if topology else None
    hbm: int | None = None
    hbm_source = "generation"
    if pod_mesh is not None:
        pod = _topology(topology or "", pod_mesh)
        section["topology"] = pod
        hbm = pod.get("hbm")
        hbm_source = pod.get("hbmSource", hbm_source)
        traced = _on_pod(traced, pod_mesh)
        leaves = jax.tree_util.tree_leaves(traced.operands)
    try:
        shardings = [_sharding_of(x) for x in leaves]
        where = jax.default_device(device) if device is not None else contextlib.nullcontext()
        with where:
            lowered = _lower(closed, traced, shardings)
            lowered_at = time.perf_counter()
            compiled = lowered.compile()
        compiled_at = time.perf_counter()
        text = compiled.as_text()
        if not text:
            raise ValueError("the compiled program has no HLO text (Compiled.as_text() returned nothing)")
        module = hlo.parse_module(text)
    except Exception as exc:
        section["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        if pod_mesh is not None and fit.out_of_memory(exc):
            verdict = fit.does_not_fit(graph, exc, leaves, hbm, spell, hbm_source)
            section["fit"] = verdict
            section["error"] = verdict["message"]
        section["seconds"] = {"total": round(time.perf_counter() - started, 3)}
        return
    section["devices"] = module.num_partitions * module.num_replicas
    section["mesh"] = _mesh(shardings)
    parsed_at = time.perf_counter()
    section.update(describe(graph, module, spell))
    section["costs"] = _costs(compiled)
    memory = section["memory"] = _memory(compiled)
    section["inputs"] = _input_shardings(graph, compiled, len(closed.jaxpr.constvars))
    if pod_mesh is None and platform == "tpu":  # a real chip says what it lets a program allocate
        hbm, hbm_source = _device_limit(device), "device"
    if pod_mesh is not None or hbm is not None:
        fitted = fit.fits(memory, hbm, hbm_source)
        if fitted is not None:
            section["fit"] = fitted
    section["seconds"] = {
        "lower": round(lowered_at - started, 3),
        "compile": round(compiled_at - lowered_at, 3),
        "read": round(parsed_at - compiled_at, 3),  # as_text() and parsing it
        "map": round(time.perf_counter() - parsed_at, 3),
    }


def describe(graph: Graph, module: hlo.Module, spell: Callable[[str], str]) -> dict[str, object]:
    """What the HLO module says about the graph: collectives, fusions, per-device shapes of values,
    the schedule's peak and the estimated per-instruction figures, each attributed to nodes."""
    index = hlomap.NodeIndex.build(graph.nodes)  # one index: its answers are shared by all below
    mapping = hlomap.map_module(module, graph.nodes, index)
    nodes = {n.id: n for n in graph.nodes}
    collectives = [_collective(c, mapping, nodes, spell) for c in module.collectives()]
    fusions = [
        {
            "instruction": f.name,
            "kind": f.fusion_kind or "",
            "nodes": mapping.get(f.name, []),
            "ops": sorted({m.opcode for m in module.fused_members(f)}),
        }
        for f in module.fusions()[:FUSION_LIMIT]
    ]
    return {
        "collectives": collectives,
        "fusions": fusions,
        "fusionCount": len(module.fusions()),
        "values": _value_shapes(graph, module, index),
        "modules": _modules(module, mapping, nodes, index),
        "peak": _peak(graph, module, mapping, nodes),
    }


def _pod_mesh() -> Mesh | None:
    """The mesh the capture set (``jax.set_mesh``, the profile's over the topology's devices)."""
    import jax

    try:
        mesh = jax.sharding.get_mesh()
    except Exception:
        return None
    return None if mesh is None or getattr(mesh, "empty", True) else mesh


class PodTopology(TypedDict):
    """The pod a program is compiled for (docs/graph-format.md "Compiled": ``topology``)."""

    name: str
    devices: int
    deviceKind: str
    hbm: NotRequired[int]  # bytes one device can allocate, where its kind is known
    hbmSource: NotRequired[str]  # "xla" (XLA's measured limit) or "generation" (the published HBM)


def _topology(name: str, mesh: Mesh) -> PodTopology:
    """The pod compiled for: its name, device count and kind, and the HBM of one device."""
    devices = list(mesh.devices.flat)
    kind = str(getattr(devices[0], "device_kind", "")) if devices else ""
    parsed = topologies.parse(name)
    found = topologies.capacity_of_kind(kind) or (topologies.capacity(parsed.generation) if parsed else None)
    out: PodTopology = {"name": name, "devices": len(devices), "deviceKind": kind}
    if found is not None:
        out["hbm"], out["hbmSource"] = found
    return out


def _device_limit(device: jax.Device | None) -> int | None:
    """The bytes a program may allocate on ``device`` (its allocator's ``bytes_limit``), else None."""
    import jax

    try:
        stats = (device or jax.devices()[0]).memory_stats() or {}
        limit = int(stats.get("bytes_limit") or 0)
    except Exception:
        return None
    return limit or None


def _on_pod(traced: Traceable, mesh: Mesh) -> Traceable:
    """``traced`` with every operand that spans no devices replicated over the pod's mesh: an
    operand with no sharding would otherwise be placed on the capture's own CPU, and a program
    with no sharded operand at all would be compiled for the CPU, not the pod."""
    import dataclasses

    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    replicate: Callable[[], P] = P  # untyped in jax
    replicated = NamedSharding(mesh, replicate())
    sds: Callable[..., jax.ShapeDtypeStruct] = jax.ShapeDtypeStruct  # untyped in jax

    def place(x: object) -> object:
        if not hasattr(x, "shape") or not hasattr(x, "dtype") or _sharding_of(x) is not None:
            return x
        typed = getattr(getattr(x, "aval", x), "sharding", None)
        if getattr(getattr(typed, "mesh", None), "_any_axis_explicit", False):
            return x  # an explicit mesh's sharding is part of the type: the trace's own
        array = cast("jax.Array | jax.ShapeDtypeStruct", x)  # it has a shape and a dtype
        return sds(array.shape, array.dtype, weak_type=bool(getattr(x, "weak_type", False)), sharding=replicated)

    operands = jax.tree_util.tree_map(place, traced.operands)
    try:
        return dataclasses.replace(traced, operands=operands)
    except TypeError:
        return traced


def _lower(closed: ClosedJaxpr, traced: Traceable, shardings: Sequence[Sharding | None]) -> Lowered:
    """The traced function lowered on its operands: ``jax.jit`` of the very function
    ``make_jaxpr`` traced, on the same operands, finds that trace in JAX's cache and only lowers
    it (the transformer's lowering took 0.21 s this way against 0.68 s for a replay of the jaxpr).
    Should that fail (a context the trace ran in and this call lacks), the jaxpr is replayed with
    ``jaxpr_as_fun``, which keeps each equation's frames and name stack, on abstract inputs with
    the operands' shardings."""
    import jax

    from jaxlsp.worker.tracing import jaxcompat

    # keep_unused: the entry's parameter N is then the graph's input N (the inputs a program never
    # reads would otherwise be dropped and the numbers shift); the caller holds them anyway
    try:
        return jax.jit(traced.fn, keep_unused=True).lower(*traced.operands)
    except Exception:
        pass
    invars = closed.jaxpr.invars
    if len(shardings) != len(invars):
        shardings = [None] * len(invars)
    specs = [_spec(v.aval, s) for v, s in zip(invars, shardings, strict=True)]
    return jax.jit(jaxcompat.jaxpr_as_fun(closed), keep_unused=True).lower(*specs)


def _sharding_of(x: object) -> Sharding | None:
    """The sharding an operand carries when it spans several devices, else None."""
    sharding = cast("Sharding | None", getattr(x, "sharding", None))
    if sharding is None:
        return None
    try:
        return sharding if len(sharding.device_set) > 1 else None
    except Exception:
        return None


def _spec(aval: object, sharding: Sharding | None) -> jax.ShapeDtypeStruct:
    import jax

    make: Callable[..., jax.ShapeDtypeStruct] = jax.ShapeDtypeStruct  # untyped in jax
    shaped = cast("ShapedArray", aval)  # a jaxpr's input
    weak = bool(getattr(aval, "weak_type", False))
    if sharding is not None:
        return make(shaped.shape, shaped.dtype, weak_type=weak, sharding=sharding)
    typed = getattr(aval, "sharding", None)  # an explicit mesh's sharding, part of the type
    mesh = getattr(typed, "mesh", None)
    if mesh is not None and not getattr(mesh, "empty", True) and getattr(mesh, "_any_axis_explicit", False):
        with contextlib.suppress(Exception):
            return make(shaped.shape, shaped.dtype, weak_type=weak, sharding=typed)
    return make(shaped.shape, shaped.dtype, weak_type=weak)


def _mesh(shardings: Sequence[Sharding | None]) -> dict[str, object] | None:
    """The mesh of the first named sharding: axis names and sizes."""
    for s in shardings:
        mesh = getattr(s, "mesh", None)
        shape = getattr(mesh, "shape", None)
        if shape:
            return {"axes": {str(k): int(v) for k, v in dict(shape).items()}}
    return None


def spec_text(sharding: object) -> str | None:
    """``P(None, 'x')`` for a NamedSharding, None for other shardings."""
    spec = getattr(sharding, "spec", None)
    if spec is None:
        return None
    parts = []
    for entry in tuple(spec):
        if entry is None:
            parts.append("None")
        elif isinstance(entry, tuple):
            parts.append("(" + ", ".join(repr(e) for e in entry) + ")")
        else:
            parts.append(repr(entry))
    return "P(" + ", ".join(parts) + ")"


def _input_shardings(graph: Graph, compiled: Compiled, n_consts: int) -> list[dict[str, str]]:
    """The sharding XLA chose for each graph input (``compiled.input_shardings``)."""
    import jax

    out: list[dict[str, str]] = []
    try:
        flat = jax.tree_util.tree_leaves(compiled.input_shardings, is_leaf=lambda x: hasattr(x, "device_set"))
    except Exception:
        return out
    ports = graph.inputs[n_consts:]
    if len(flat) != len(ports):
        return out
    for port, sharding in zip(ports, flat, strict=True):
        text = spec_text(sharding)
        if text is not None:
            out.append({"value": port.value, "sharding": text})
    return out


def _collective(
    instr: hlo.Instruction, mapping: dict[str, list[str]], nodes: dict[str, Node], spell: Callable[[str], str]
) -> dict[str, object]:
    ids = mapping.get(instr.name, [])
    node = nodes.get(ids[0]) if ids else None
    source: dict[str, object] | None = None
    if node is not None and node.source is not None:
        source = {**node.source.range_json()}
    elif instr.frames:
        f = instr.frames[0]
        source = {
            "path": spell(f.file),
            "line": f.line,
            "column": f.column,
            "endLine": f.end_line,
            "endColumn": f.end_column,
        }
    return {
        "kind": instr.collective_kind,
        "instruction": instr.name,
        "shape": instr.shape,
        "bytes": instr.bytes,
        "replicaGroups": [list(g) for g in instr.replica_groups] if instr.replica_groups is not None else None,
        "replicaGroupsText": instr.replica_groups_text,
        "opName": instr.op_name,
        "nodes": ids,
        "scope": _scope_of(ids, nodes) if ids else _scope_from_op_name(instr.op_name),
        "source": source,
    }


def _scope_of(ids: list[str], nodes: dict[str, Node]) -> str:
    return common_scope([nodes[i].scope for i in ids if i in nodes])


def _scope_from_op_name(op_name: str) -> str:
    """The module path the name stack names, for an instruction no node matched: the worker's own
    scopes (``jaxlsp::blocks/0``) when present, else the plain names (Linen's)."""
    names = [n for n in hlo.scope_names(op_name) if not n.startswith("jit(")]
    marked = [n.split("::", 1)[1] for n in names if "::" in n]
    return marked[-1] if marked else "/".join(names)


def _value_shapes(graph: Graph, module: hlo.Module, index: hlomap.NodeIndex) -> dict[str, dict[str, list[int]]]:
    """Value id -> ``{perDevice, split}``: the per-device shape of the HLO instruction computing
    the value (the only output of the one node it maps to, of the same rank, each global dimension
    a multiple of the device's), and how many parts each dimension is split into."""
    values = {v.id: v for v in graph.values}
    producers = {n.id: n for n in graph.nodes}
    out: dict[str, dict[str, list[int]]] = {}
    skip = {"parameter", "constant", "bitcast", "tuple", "get-tuple-element", "copy", "fusion"}
    inputs = [p.value for p in graph.inputs if p.role != "constant"]
    found: list[tuple[str, hlo.Instruction]] = []  # (value id, the instruction that holds it)
    for instr in module.schedule():  # the entry's parameters are the graph's inputs, in order
        number = instr.parameter_number
        if instr.opcode == "parameter" and number is not None and 0 <= number < len(inputs):
            found.append((inputs[number], instr))
    for instr in module.instructions():
        if instr.opcode in skip or instr.is_collective or not instr.op_name:
            continue
        ids = hlomap.map_instruction(instr, index)
        if len(ids) != 1:
            continue
        node = producers[ids[0]]
        if len(node.outputs) == 1:
            found.append((node.outputs[0], instr))
    for vid, instr in found:
        if vid in out:
            continue
        value = values.get(vid)
        local = hlo.array_dims(instr.shape)
        if value is None or local is None or len(local) != len(value.shape):
            continue
        if not all(isinstance(g, int) for g in value.shape):
            continue
        split: list[int] = []
        for g, d in zip(value.shape, local, strict=True):
            if not isinstance(g, int) or d <= 0 or g % d:
                split = []
                break
            split.append(g // d)
        if split or not local:
            out[value.id] = {"perDevice": local, "split": split}
    return out


def _modules(
    module: hlo.Module, mapping: dict[str, list[str]], nodes: dict[str, Node], index: hlomap.NodeIndex
) -> list[dict[str, object]]:
    """Per module (and its ancestors, as the costs table counts): estimated FLOPs and bytes of the
    compiled program on one device, and the collectives' count and bytes (loop bodies once)."""
    rows: dict[str, dict[str, int]] = {}

    def add(scope: str, key: str, amount: int) -> None:
        parts = scope.split("/") if scope else []
        for k in range(len(parts) + 1):
            name = "/".join(parts[:k])
            row = rows.setdefault(name, {"flops": 0, "bytes": 0, "collectiveBytes": 0, "collectives": 0})
            row[key] += amount

    for instr in _kernels(module):
        if instr.opcode in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast"):
            continue
        ids = mapping.get(instr.name, [])
        scope = _scope_of(ids, nodes) if ids else _scope_from_op_name(instr.op_name)
        add(scope, "bytes", module.bytes_accessed(instr))
        if instr.is_collective:
            add(scope, "collectiveBytes", instr.bytes)
            add(scope, "collectives", 1)
        members = module.fused_members(instr) if instr.opcode == "fusion" else [instr]
        for member in members:
            flops = module.flops(member)
            if not flops:
                continue
            mids = hlomap.map_instruction(member, index) or ids
            add(_scope_of(mids, nodes) if mids else scope, "flops", flops)
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1]["flops"], -kv[1]["bytes"], kv[0]))
    return [{"scope": scope, **row} for scope, row in ordered]


# Opcodes whose called computations are per-element combiners or comparators, not steps.
_APPLYING = frozenset(
    {"reduce", "reduce-window", "all-reduce", "all-reduce-start", "reduce-scatter", "scatter", "sort", "map",
     "select-and-scatter"}
)  # fmt: skip


def _kernels(module: hlo.Module) -> list[hlo.Instruction]:
    """The instructions that run as steps: the entry computation's and those of the computations
    it runs as steps (loop bodies and conditions, branches, calls), each body counted once as
    XLA's own cost analysis counts it; not the fused computations nor the combiners of reductions."""
    skip = module.fused_computations()
    skip |= {c for i in module.instructions() if i.opcode in _APPLYING for c in i.called}
    return [i for comp in module.computations.values() if comp.name not in skip for i in comp.instructions]


def _peak(graph: Graph, module: hlo.Module, mapping: dict[str, list[str]], nodes: dict[str, Node]) -> dict[str, object]:
    """The peak of the compiled schedule on one device and the buffers live at it, by module."""
    peak = module.schedule_peak()
    inputs = [p.value for p in graph.inputs if p.role != "constant"]
    held: list[dict[str, object]] = []
    by_module: dict[str, int] = {}
    users: dict[str, list[str]] = {}  # value id -> the nodes that read it
    for n in graph.nodes:
        for v in n.inputs:
            users.setdefault(v, []).append(n.id)
    for buf in peak.live:
        instr = buf.instruction
        entry: dict[str, object] = {"instruction": instr.name, "bytes": buf.bytes}
        if instr.opcode == "parameter":
            number = instr.parameter_number
            value = inputs[number] if number is not None and 0 <= number < len(inputs) else None
            consumers = users.get(value, []) if value is not None else []
            scope = _scope_of(consumers, nodes) if consumers else ""
            entry.update(kind="argument", value=value)
        else:
            ids = mapping.get(instr.name, [])
            scope = _scope_of(ids, nodes) if ids else _scope_from_op_name(instr.op_name)
            node = nodes.get(ids[-1]) if ids else None
            entry.update(kind="output" if buf.live_out else "temporary", nodes=ids)
            # a collective's buffer is what it moved (a gathered weight), not its node's result
            if node is not None and len(node.outputs) == 1 and not instr.is_collective:
                entry["value"] = node.outputs[0]
        entry["scope"] = scope
        held.append(entry)
        by_module[scope] = by_module.get(scope, 0) + buf.bytes
    held.sort(key=lambda e: -cast(int, e["bytes"]))  # each entry's bytes: an int (above)
    return {
        "bytes": peak.bytes,
        "at": peak.at.name if peak.at is not None else None,
        "method": "compiled schedule",
        "byModule": [{"scope": s, "bytes": b} for s, b in sorted(by_module.items(), key=lambda kv: (-kv[1], kv[0]))],
        "values": held[:50],
    }


def _costs(compiled: Compiled) -> dict[str, int] | None:
    from jaxlsp.worker.tracing import jaxcompat

    try:
        analysis = jaxcompat.cost_dict(compiled.cost_analysis())
    except Exception:
        return None
    out: dict[str, int] = {}
    for key, name in (("flops", "flops"), ("bytes accessed", "bytes"), ("transcendentals", "transcendentals")):
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            out[name] = max(0, round(float(analysis.get(key, 0))))
    return out


def _memory(compiled: Compiled) -> dict[str, int] | None:
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return None
    if stats is None:
        return None
    out = {
        "argument": int(getattr(stats, "argument_size_in_bytes", 0)),
        "output": int(getattr(stats, "output_size_in_bytes", 0)),
        "alias": int(getattr(stats, "alias_size_in_bytes", 0)),
        "temp": int(getattr(stats, "temp_size_in_bytes", 0)),
        "generatedCode": int(getattr(stats, "generated_code_size_in_bytes", 0)),
    }
    peak = getattr(stats, "peak_memory_in_bytes", None)
    if isinstance(peak, int):
        out["peak"] = peak
    return out
