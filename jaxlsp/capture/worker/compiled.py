"""The compiled program (``jaxlsp trace --compiled``): lower and compile the traced program for the
profile's devices and read what XLA made of it back onto the graph (runs in the user's
interpreter, after the graph is built).

The traced jaxpr is replayed (``jaxpr_as_fun``, which keeps each equation's source frames and name
stack, so the HLO's metadata points at the user's lines) under ``jax.jit`` on the abstract inputs,
each with the sharding its operand carries (a factory's sharded ``ShapeDtypeStruct``, an
initialised model's sharded arrays); then ``compile()`` on the profile's device: the CPU (with
``devices = N`` virtual devices) or ``cuda:N``. From the optimised HLO (``compiled.as_text()``,
read by :mod:`.hlo`) come the collectives XLA inserted, the fusions, each value's per-device shape,
and the peak of the compiled schedule; from XLA's analyses the per-device costs and memory. The
section's format is in docs/graph-format.md ("Compiled"); ``jaxlsp.graph.compiled`` renders it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from jaxlsp.capture.worker import hlo
from jaxlsp.graph.model import Frame, Graph, Node

FUSION_LIMIT = 5000  # fusions listed (a 12-layer transformer's gradient has about 600)


def measure(graph: Graph, closed: Any, operands: Any, device: Any, platform: str, spell: Any) -> None:
    """Fill ``graph.compiled``. ``device``: the jax device to compile for (None: the default);
    ``spell``: absolute path -> the graph's spelling of it (for frames XLA names that no node has).
    A failure to lower or compile is kept as ``error`` (the graph itself stands)."""
    import jax

    from jaxlsp.capture.worker import jaxcompat

    section: dict[str, Any] = {"platform": platform}
    graph.compiled = section
    started = time.perf_counter()
    try:
        fn = jaxcompat.jaxpr_as_fun(closed)
        leaves = jax.tree_util.tree_leaves(operands)
        invars = closed.jaxpr.invars
        shardings = [_sharding_of(x) for x in leaves] if len(leaves) == len(invars) else [None] * len(invars)
        specs = [_spec(v.aval, s) for v, s in zip(invars, shardings, strict=True)]
        where = jax.default_device(device) if device is not None else contextlib.nullcontext()
        with where:
            lowered = jax.jit(fn).lower(*specs)
            lowered_at = time.perf_counter()
            compiled = lowered.compile()
        compiled_at = time.perf_counter()
        text = compiled.as_text()
        if not text:
            raise ValueError("the compiled program has no HLO text (Compiled.as_text() returned nothing)")
        module = hlo.parse_module(text)
    except Exception as exc:
        section["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        section["seconds"] = {"total": round(time.perf_counter() - started, 3)}
        return
    section["devices"] = module.num_partitions * module.num_replicas
    section["mesh"] = _mesh(shardings)
    section.update(describe(graph, module, spell))
    section["costs"] = _costs(compiled)
    section["memory"] = _memory(compiled)
    section["inputs"] = _input_shardings(graph, compiled, len(closed.jaxpr.constvars))
    section["seconds"] = {
        "lower": round(lowered_at - started, 3),
        "compile": round(compiled_at - lowered_at, 3),
        "map": round(time.perf_counter() - compiled_at, 3),
    }


def describe(graph: Graph, module: hlo.Module, spell: Any) -> dict[str, Any]:
    """What the HLO module says about the graph: collectives, fusions, per-device shapes of values,
    the schedule's peak and the estimated per-instruction figures, each attributed to nodes."""
    mapping = hlo.map_module(module, graph.nodes)
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
        "values": _value_shapes(graph, module),
        "modules": _modules(module, mapping, nodes),
        "peak": _peak(graph, module, mapping, nodes),
    }


def _sharding_of(x: Any) -> Any:
    """The sharding an operand carries when it spans several devices, else None."""
    sharding = getattr(x, "sharding", None)
    if sharding is None:
        return None
    try:
        return sharding if len(sharding.device_set) > 1 else None
    except Exception:
        return None


def _spec(aval: Any, sharding: Any) -> Any:
    import jax

    make: Any = jax.ShapeDtypeStruct
    weak = bool(getattr(aval, "weak_type", False))
    if sharding is not None:
        return make(aval.shape, aval.dtype, weak_type=weak, sharding=sharding)
    typed = getattr(aval, "sharding", None)  # an explicit mesh's sharding, part of the type
    mesh = getattr(typed, "mesh", None)
    if mesh is not None and not getattr(mesh, "empty", True) and getattr(mesh, "_any_axis_explicit", False):
        with contextlib.suppress(Exception):
            return make(aval.shape, aval.dtype, weak_type=weak, sharding=typed)
    return make(aval.shape, aval.dtype, weak_type=weak)


def _mesh(shardings: list[Any]) -> dict[str, Any] | None:
    """The mesh of the first named sharding: axis names and sizes."""
    for s in shardings:
        mesh = getattr(s, "mesh", None)
        shape = getattr(mesh, "shape", None)
        if shape:
            return {"axes": {str(k): int(v) for k, v in dict(shape).items()}}
    return None


def spec_text(sharding: Any) -> str | None:
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


def _input_shardings(graph: Graph, compiled: Any, n_consts: int) -> list[dict[str, Any]]:
    """The sharding XLA chose for each graph input (``compiled.input_shardings``)."""
    import jax

    out: list[dict[str, Any]] = []
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


def _frame_json(frame: Frame) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": frame.path,
        "line": frame.line,
        "column": frame.column,
        "endLine": frame.end_line,
        "endColumn": frame.end_column,
    }
    if frame.cell is not None:
        out["cell"] = frame.cell
    return out


def _collective(
    instr: hlo.Instruction, mapping: dict[str, list[str]], nodes: dict[str, Node], spell: Any
) -> dict[str, Any]:
    ids = mapping.get(instr.name, [])
    node = nodes.get(ids[0]) if ids else None
    source: dict[str, Any] | None = None
    if node is not None and node.source is not None:
        source = _frame_json(node.source)
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
    scopes = [nodes[i].scope for i in ids if i in nodes]
    if not scopes:
        return ""
    parts = scopes[0].split("/") if scopes[0] else []
    for s in scopes[1:]:
        other = s.split("/") if s else []
        k = 0
        while k < min(len(parts), len(other)) and parts[k] == other[k]:
            k += 1
        parts = parts[:k]
    return "/".join(parts)


def _scope_from_op_name(op_name: str) -> str:
    """The module path the name stack names, for an instruction no node matched: the worker's own
    scopes (``jaxlsp::blocks/0``) when present, else the plain names (Linen's)."""
    names = [n for n in hlo.scope_names(op_name) if not n.startswith("jit(")]
    marked = [n.split("::", 1)[1] for n in names if "::" in n]
    return marked[-1] if marked else "/".join(names)


def _value_shapes(graph: Graph, module: hlo.Module) -> dict[str, dict[str, Any]]:
    """Value id -> ``{perDevice, split}``: the per-device shape of the HLO instruction computing
    the value (the only output of the one node it maps to, of the same rank, each global dimension
    a multiple of the device's), and how many parts each dimension is split into."""
    values = {v.id: v for v in graph.values}
    producers = {n.id: n for n in graph.nodes}
    index = hlo.NodeIndex.build(graph.nodes)
    out: dict[str, dict[str, Any]] = {}
    skip = {"parameter", "constant", "bitcast", "tuple", "get-tuple-element", "copy", "fusion"}
    for instr in module.instructions():
        if instr.opcode in skip or instr.is_collective or not instr.op_name:
            continue
        ids = hlo.map_instruction(instr, index)
        if len(ids) != 1:
            continue
        node = producers[ids[0]]
        if len(node.outputs) != 1 or node.outputs[0] in out:
            continue
        value = values.get(node.outputs[0])
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


def _modules(module: hlo.Module, mapping: dict[str, list[str]], nodes: dict[str, Node]) -> list[dict[str, Any]]:
    """Per module (and its ancestors, as the costs table counts): estimated FLOPs and bytes of the
    compiled program on one device, and the collectives' count and bytes."""
    rows: dict[str, dict[str, int]] = {}
    index = hlo.NodeIndex.build(nodes.values())

    def add(scope: str, key: str, amount: int) -> None:
        parts = scope.split("/") if scope else []
        for k in range(len(parts) + 1):
            name = "/".join(parts[:k])
            row = rows.setdefault(name, {"flops": 0, "bytes": 0, "collectiveBytes": 0, "collectives": 0})
            row[key] += amount

    for instr in module.schedule():
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
            mids = hlo.map_instruction(member, index) or ids
            add(_scope_of(mids, nodes) if mids else scope, "flops", flops)
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1]["flops"], -kv[1]["bytes"], kv[0]))
    return [{"scope": scope, **row} for scope, row in ordered]


def _peak(graph: Graph, module: hlo.Module, mapping: dict[str, list[str]], nodes: dict[str, Node]) -> dict[str, Any]:
    """The peak of the compiled schedule on one device and the buffers live at it, by module."""
    peak = module.schedule_peak()
    inputs = [p.value for p in graph.inputs if p.role != "constant"]
    held: list[dict[str, Any]] = []
    by_module: dict[str, int] = {}
    for buf in peak.live:
        instr = buf.instruction
        entry: dict[str, Any] = {"instruction": instr.name, "bytes": buf.bytes}
        if instr.opcode == "parameter":
            number = instr.parameter_number
            value = inputs[number] if number is not None and 0 <= number < len(inputs) else None
            consumers = [n for n in graph.nodes if value is not None and value in n.inputs]
            scope = _scope_of([n.id for n in consumers], nodes) if consumers else ""
            entry.update(kind="argument", value=value)
        else:
            ids = mapping.get(instr.name, [])
            scope = _scope_of(ids, nodes) if ids else _scope_from_op_name(instr.op_name)
            node = nodes.get(ids[-1]) if ids else None
            entry.update(kind="output" if buf.live_out else "temporary", nodes=ids)
            if node is not None and len(node.outputs) == 1:
                entry["value"] = node.outputs[0]
        entry["scope"] = scope
        held.append(entry)
        by_module[scope] = by_module.get(scope, 0) + buf.bytes
    held.sort(key=lambda e: -int(e["bytes"]))
    return {
        "bytes": peak.bytes,
        "at": peak.at.name if peak.at is not None else None,
        "method": "compiled schedule",
        "byModule": [{"scope": s, "bytes": b} for s, b in sorted(by_module.items(), key=lambda kv: (-kv[1], kv[0]))],
        "values": held[:50],
    }


def _costs(compiled: Any) -> dict[str, int] | None:
    from jaxlsp.capture.worker import jaxcompat

    try:
        analysis = jaxcompat.cost_dict(compiled.cost_analysis())
    except Exception:
        return None
    out: dict[str, int] = {}
    for key, name in (("flops", "flops"), ("bytes accessed", "bytes"), ("transcendentals", "transcendentals")):
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            out[name] = max(0, round(float(analysis.get(key, 0))))
    return out


def _memory(compiled: Any) -> dict[str, int] | None:
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
