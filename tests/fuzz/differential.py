"""Trace a generated program through the real worker and check it against an independent
``jax.make_jaxpr`` of the same function (the invariants of the differential fuzzer).

The worker runs in this process (``capture()``, what the warm spare's forked child runs), in its
packed transport, and the graph is read back as the server reads it. The reference imports the
same file under another module name, builds its own abstract inputs and walks its own jaxpr with
``jax.extend.core.jaxprs_in_params``; nothing of the worker's is shared. Invariants:

- both succeed or both fail (a program JAX refuses is refused by the worker too, as a trace error);
- the graph reads back, checks out (``validate.check``) and matches the JSON Schema;
- equation counts per sub-jaxpr: the multiset of sizes of the top-level jaxpr and every nested one
  equals that of the graph's top level and body groups;
- the primitive multiset over all equations, nested ones included;
- the output avals (shape, symbolic dims as text, dtype, weak type), in order;
- every node's source frame is a line of the generated file, relative path;
- coverage is complete unless an opaque construct (``pure_callback``) was generated, and then the
  opaque regions are exactly those nodes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxlsp.graph import io
from jaxlsp.graph.validate import check, load_schema
from tests.fuzz.programs import Program


@dataclass
class Outcome:
    valid: bool  # JAX traced it (else both sides refused it)
    nodes: int = 0


@contextlib.contextmanager
def _isolated() -> Iterator[None]:
    path, cwd, modules = list(sys.path), os.getcwd(), set(sys.modules)
    try:
        yield
    finally:
        sys.path[:] = path
        os.chdir(cwd)
        for name in set(sys.modules) - modules:
            if name.startswith(("prog_", "fuzzref_")):
                del sys.modules[name]


def request_for(program: Program, root: Path) -> dict[str, Any]:
    return {
        "target": {"path": str(root / f"{program.name}.py"), "name": "f", "kind": "function"},
        "profile": {
            "name": None,
            "device": "cpu",
            "seed": 0,
            "x64": False,
            "inputs": {"args": program.specs, "kwargs": {}},
            "load": "module",
            **({"symbolic": ["b"]} if program.symbolic else {}),
        },
        "workspaceRoot": str(root),
        "resultFd": -1,
        "transport": "packed",
    }


def reference(program: Program, path: Path) -> Any:
    """``jax.make_jaxpr(f, return_shape=True)`` of the file's ``f`` on abstract inputs built here:
    ``(closed jaxpr, result structure)``, or the exception."""
    import jax

    spec = importlib.util.spec_from_file_location(f"fuzzref_{program.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    scope = jax.export.SymbolicScope()
    (b,) = jax.export.symbolic_shape("b", scope=scope)

    def build(s: dict[str, Any]) -> Any:
        if s["kind"] == "array":
            shape = tuple(b if d == "b" else d for d in s["shape"])
            return jax.ShapeDtypeStruct(shape, s["dtype"])
        if s["kind"] == "key":
            return jax.eval_shape(lambda: jax.random.key(s["seed"]))
        if s["kind"] == "dict":
            return {k: build(v) for k, v in s["items"].items()}
        raise AssertionError(s)

    args = [build(s) for s in program.specs]
    try:
        return jax.make_jaxpr(module.f, return_shape=True)(*args)  # (closed jaxpr, result structure)
    except Exception as exc:
        return exc


def _sequence(jaxpr: Any) -> list[tuple[str, tuple[tuple[tuple[str, ...], str, bool], ...]]]:
    """``(primitive, output avals)`` of every equation, each followed by its sub-jaxprs' own, in
    order: the order the graph's nodes come in."""
    from jax.extend.core import jaxprs_in_params

    out = []
    for eqn in jaxpr.eqns:
        avals = tuple(_aval(v.aval.shape, v.aval.dtype, getattr(v.aval, "weak_type", False)) for v in eqn.outvars)
        out.append((eqn.primitive.name, avals))
        for sub in jaxprs_in_params(eqn.params):
            out += _sequence(sub)
    return out


def _labels(tree: Any, prefix: str) -> list[str]:
    import jax

    labels = []
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        parts = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
        labels.append("/".join([prefix, *parts]) if parts else prefix)
    return labels


def _sizes_and_primitives(jaxpr: Any) -> tuple[list[int], Counter[str]]:
    from jax.extend.core import jaxprs_in_params

    sizes = [len(jaxpr.eqns)]
    primitives: Counter[str] = Counter()
    for eqn in jaxpr.eqns:
        primitives[eqn.primitive.name] += 1
        for sub in jaxprs_in_params(eqn.params):
            more, prims = _sizes_and_primitives(sub)
            sizes += more
            primitives += prims
    return sizes, primitives


def _graph_sizes(graph: Any) -> list[int]:
    """Equations per sub-program in the graph: the top level and each body group (a group owned
    by an equation with no child group of the same owner). An owning equation sits inside its
    outermost region but belongs to the program around that region; named scopes (``module``
    groups, such as the one ``jnp.einsum`` opens) are inside a program, not programs."""
    groups = {g.id: g for g in graph.groups}
    outermost: dict[str, str] = {}
    for g in graph.groups:
        if g.node is None:
            continue
        top = g
        while top.parent is not None and groups[top.parent].node == g.node:
            top = groups[top.parent]
        outermost[g.node] = top.id

    def program_of(gid: str | None) -> str | None:
        """The sub-program holding group ``gid``: named scopes (module groups) are not one."""
        while gid is not None and groups[gid].node is None:
            gid = groups[gid].parent
        return gid

    counts: Counter[str | None] = Counter()
    for node in graph.nodes:
        container = groups[outermost[node.id]].parent if node.id in outermost else node.group
        counts[program_of(container)] += 1
    wrappers = {g.parent for g in graph.groups if g.parent is not None and groups[g.parent].node == g.node}
    bodies = [g.id for g in graph.groups if g.node is not None and g.id not in wrappers]
    return [counts[None], *(counts[g] for g in bodies)]


def _aval(shape: Any, dtype: Any, weak: bool) -> tuple[tuple[str, ...], str, bool]:
    return tuple(str(d) for d in shape), str(dtype), bool(weak)


def run(program: Program, root: Path) -> Outcome:
    """Write, trace and check one program; AssertionError (with the program) on any mismatch."""
    from jaxlsp.worker.process.main import capture

    path = root / f"{program.name}.py"
    path.write_text(program.text)
    with _isolated():
        result = dict(capture(request_for(program, root)))
        ref = reference(program, path)
    where = f"\n--- {path.name} ---\n{program.text}"
    if isinstance(ref, Exception):
        error = result.get("error") or {}
        assert not result["ok"] and error.get("kind") == "trace", (
            f"JAX refused it ({ref!r}) but the worker said {result}{where}"
        )
        return Outcome(valid=False)
    ref, out_tree = ref
    assert result["ok"], f"the worker failed where make_jaxpr did not: {result.get('error')}{where}"
    data = result["graph"]
    graph = io.from_json(data)
    assert check(graph) == [], f"{check(graph)}{where}"
    _validate(io.to_json(graph))

    sizes, primitives = _sizes_and_primitives(ref.jaxpr)
    assert sorted(_graph_sizes(graph)) == sorted(sizes), (
        f"equations per sub-jaxpr: {_graph_sizes(graph)} vs {sizes}{where}"
    )
    assert Counter(n.primitive for n in graph.nodes) == primitives, f"primitives differ{where}"

    values = {v.id: v for v in graph.values}
    got = [_aval(values[p.value].shape, values[p.value].dtype, values[p.value].weak_type) for p in graph.outputs]
    want = [_aval(a.shape, a.dtype, getattr(a, "weak_type", False)) for a in ref.out_avals]
    assert got == want, f"output avals: {got} vs {want}{where}"
    nodes = [
        (n.primitive, tuple(_aval(values[o].shape, values[o].dtype, values[o].weak_type) for o in n.outputs))
        for n in graph.nodes
    ]
    assert nodes == _sequence(ref.jaxpr), f"nodes in order, with their output avals, differ{where}"

    # ports: one per input and output leaf, labelled by its pytree path, keys in the role key
    in_avals = ref.in_avals
    assert [p.label for p in graph.outputs] == _labels(out_tree, "out"), f"output labels{where}"
    ins = [p for p in graph.inputs if p.role != "constant"]
    assert len(ins) == len(in_avals) == len(ref.jaxpr.invars), f"inputs{where}"
    assert [p.label for p in ins] == [
        label for i, spec in enumerate(program.specs) for label in _labels(_spec_tree(spec), f"args/{i}")
    ], f"input labels{where}"
    roles = [p.role for p in ins]
    assert roles == ["key" if "key" in str(values[p.value].dtype) else "input" for p in ins], f"roles {roles}{where}"
    assert len(graph.inputs) - len(ins) == len(ref.jaxpr.constvars), f"constants{where}"

    lines = len(program.text.splitlines())
    for node in graph.nodes:
        source = node.source
        assert source is not None, f"{node.id} {node.primitive} has no source frame{where}"
        assert source.path == path.name and 1 <= source.line <= lines, f"{node.id}: {source}{where}"
        for frame in node.frames:
            assert not os.path.isabs(frame.path) and "jaxlsp/" not in frame.path, f"{node.id}: {frame}{where}"

    callbacks = {n.id for n in graph.nodes if n.primitive == "pure_callback"}
    assert graph.coverage.complete is (not program.opaque), f"coverage {graph.coverage}{where}"
    assert {o["node"] for o in graph.coverage.opaque} == callbacks, f"opaque {graph.coverage.opaque}{where}"
    return Outcome(valid=True, nodes=len(graph.nodes))


def _spec_tree(spec: dict[str, Any]) -> Any:
    return {k: _spec_tree(v) for k, v in spec["items"].items()} if spec["kind"] == "dict" else 0


_SCHEMA: list[Any] = []


def _validate(data: dict[str, Any]) -> None:
    from jsonschema import Draft202012Validator

    if not _SCHEMA:
        _SCHEMA.append(Draft202012Validator(load_schema()))
    errors = [e.message for e in _SCHEMA[0].iter_errors(json.loads(json.dumps(data)))]
    assert errors == [], errors[:3]
