"""The expanded form (version 1, docs/graph-format.md) read back, strictly: the object's top level,
its small sections (coverage, groups, costs, execution, contracts, compiled, time) and, through
:mod:`jaxlsp.graph.expanded_rows`, its rows.

Stdlib only, Python >= 3.10: the capture worker imports this module inside the user's interpreter.
:func:`read_graph` raises a ``ValueError`` that names the key path (``nodes[3].source.endLine:
...``) of the first problem; a section that readers total up or rely on is checked where they
do, and copied whole. Which form an object is in is :func:`jaxlsp.graph.io.from_json`'s to tell.
"""

from __future__ import annotations

import json
from typing import Any

from jaxlsp.graph import shardings, strict
from jaxlsp.graph.expanded_rows import read_frame, read_node, read_port, read_value
from jaxlsp.graph.model import (
    BACKEND,
    COMPACT_VERSION,
    FORMAT,
    FRAME_TABLE,
    INPUT_ROLES,
    OUTPUT_ROLES,
    VERSION,
    VERSION_KEYS,
    Coverage,
    Frame,
    Graph,
    Group,
)

_TOP_KEYS = (
    "format",
    "version",
    "backend",
    "versions",
    "target",
    "profile",
    "coverage",
    "sources",
    "inputs",
    "outputs",
    "nodes",
    "values",
    "groups",
)
_OPTIONAL_TOP_KEYS = ("costs", "execution", "contracts", "mesh", "compiled", "time")
# The graph's ``costs``: how the per-node figures were measured (docs/graph-format.md).
_GRAPH_COST_KEYS = ("equations", "measured", "unique", "cached", "lowered", "unknown", "seconds", "xla")
VALIDATION_STATUSES = ("verified", "partial", "mismatch")


def read_graph(data: Any) -> Graph:
    """The :class:`Graph` of an expanded (version 1) object, or of the earlier workers' pipe form
    (``frameTable``); ``ValueError`` naming the key path of the first problem."""
    d = strict.obj(data, "", _TOP_KEYS, (FRAME_TABLE, *_OPTIONAL_TOP_KEYS))
    table: list[Frame] | None = None
    if FRAME_TABLE in d:
        entries = strict.array(d[FRAME_TABLE], FRAME_TABLE)
        table = [read_frame(f, f"{FRAME_TABLE}[{i}]") for i, f in enumerate(entries)]
    if d["format"] != FORMAT:
        raise strict.fail(
            "format", f"expected {FORMAT!r}, got {json.dumps(d['format'], default=repr)}: not a jaxlsp graph"
        )
    version = strict.integer(d["version"], "version", 1)
    if version != VERSION:
        raise strict.fail(
            "version", f"unsupported version {version} (this jaxlsp reads versions {VERSION} and {COMPACT_VERSION})"
        )
    if d["backend"] != BACKEND:
        raise strict.fail("backend", f"expected {BACKEND!r}, got {json.dumps(d['backend'], default=repr)}")

    versions = strict.open_obj(d["versions"], "versions", VERSION_KEYS)
    for key, v in versions.items():
        strict.opt_string(v, strict.join("versions", key))

    target = strict.open_obj(d["target"], "target", ("path", "name", "kind"))
    for key in ("path", "name", "kind"):
        strict.string(target[key], strict.join("target", key))
    profile = strict.open_obj(d["profile"], "profile", ("name",))
    strict.opt_string(profile["name"], "profile.name")

    sources = d["sources"]
    if not isinstance(sources, dict):
        raise strict.fail("sources", f"expected an object, got {strict.kind(sources)}")
    for key, digest in sources.items():
        strict.string(digest, f"sources[{json.dumps(key)}]")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise strict.fail(f"sources[{json.dumps(key)}]", "expected a sha256 as 64 lowercase hex digits")

    return Graph(
        target=strict.json_copy(target, "target"),
        profile=strict.json_copy(profile, "profile"),
        versions=dict(versions),
        coverage=_coverage(d["coverage"], "coverage"),
        sources=dict(sources),
        inputs=[read_port(p, f"inputs[{i}]", INPUT_ROLES) for i, p in enumerate(strict.array(d["inputs"], "inputs"))],
        outputs=[
            read_port(p, f"outputs[{i}]", OUTPUT_ROLES) for i, p in enumerate(strict.array(d["outputs"], "outputs"))
        ],
        nodes=_items(d, "nodes", lambda n, p: read_node(n, p, table)),
        values=_items(d, "values", read_value),
        groups=_items(d, "groups", _group),
        costs=_graph_costs(d.get("costs")),
        execution=None if d.get("execution") is None else _execution(d["execution"], "execution"),
        contracts=None if d.get("contracts") is None else _contracts(d["contracts"], "contracts"),
        mesh=None if d.get("mesh") is None else shardings.read_mesh(d["mesh"], "mesh"),
        compiled=None if d.get("compiled") is None else _compiled(d["compiled"], "compiled"),
        time=None if d.get("time") is None else _time(d["time"], "time"),
        format=FORMAT,
        version=VERSION,
        backend=BACKEND,
    )


def _group(data: Any, path: str) -> Group:
    d = strict.obj(data, path, ("id", "kind", "parent", "label", "node"))
    return Group(
        id=strict.string(d["id"], strict.join(path, "id"), nonempty=True),
        kind=strict.string(d["kind"], strict.join(path, "kind"), nonempty=True),
        parent=strict.opt_string(d["parent"], strict.join(path, "parent"), nonempty=True),
        label=strict.string(d["label"], strict.join(path, "label")),
        node=strict.opt_string(d["node"], strict.join(path, "node"), nonempty=True),
    )


def _coverage(data: Any, path: str) -> Coverage:
    d = strict.obj(data, path, ("scope", "complete", "opaque", "notes", "effects"))
    if d["scope"] != "traced_program":
        raise strict.fail(
            strict.join(path, "scope"), f"expected 'traced_program', got {json.dumps(d['scope'], default=repr)}"
        )
    opaque_path = strict.join(path, "opaque")
    opaque = []
    for i, item in enumerate(strict.array(d["opaque"], opaque_path)):
        p = f"{opaque_path}[{i}]"
        o = strict.obj(item, p, ("node", "reason"))
        strict.string(o["node"], strict.join(p, "node"), nonempty=True)
        strict.string(o["reason"], strict.join(p, "reason"))
        opaque.append({"node": o["node"], "reason": o["reason"]})
    complete = strict.boolean(d["complete"], strict.join(path, "complete"))
    if complete and opaque:
        raise strict.fail(strict.join(path, "complete"), "true although opaque regions are listed")
    return Coverage(
        scope="traced_program",
        complete=complete,
        opaque=opaque,
        notes=strict.strings(d["notes"], strict.join(path, "notes")),
        effects=strict.strings(d["effects"], strict.join(path, "effects")),
    )


def _execution(data: Any, path: str) -> dict[str, Any]:
    """The ``execution`` object of a values run: checked where readers rely on it, copied whole."""
    d = strict.obj(
        data,
        path,
        ("device", "seconds", "validation", "executed"),
        ("firstNonFinite", "gradients"),
    )
    strict.string(d["device"], strict.join(path, "device"))
    strict.number(d["seconds"], strict.join(path, "seconds"))
    vp = strict.join(path, "validation")
    validation = strict.open_obj(d["validation"], vp, ("status",))
    strict.enum(validation["status"], strict.join(vp, "status"), VALIDATION_STATUSES)
    executed = d["executed"]
    if not isinstance(executed, dict):
        raise strict.fail(strict.join(path, "executed"), f"expected an object, got {strict.kind(executed)}")
    for key, count in executed.items():
        strict.integer(count, f"{strict.join(path, 'executed')}[{json.dumps(key)}]", 0)
    first = d.get("firstNonFinite")
    if first is not None:
        fp = strict.join(path, "firstNonFinite")
        f = strict.open_obj(first, fp, ("node", "value", "primitive", "kind", "message"))
        for key in ("node", "value", "primitive", "kind", "message"):
            strict.string(f[key], strict.join(fp, key), nonempty=True)
    copied: dict[str, Any] = strict.json_copy(d, path)
    return copied


def _contracts(data: Any, path: str) -> dict[str, Any]:
    """The ``contracts`` section: each violation's members that readers rely on are checked."""
    d = strict.obj(data, path, ("checked", "violations"), ("notes", "dims"))
    for i, item in enumerate(strict.array(d.get("dims", []), f"{path}.dims")):
        where = f"{path}.dims[{i}]"
        v = strict.obj(item, where, ("function", "path", "line", "endLine", "dims"), ())
        sizes = v["dims"]
        if not isinstance(sizes, dict):
            raise strict.fail(f"{where}.dims", f"expected an object, got {strict.kind(sizes)}")
        for name, size in sizes.items():
            if not isinstance(size, int) or isinstance(size, bool):
                raise strict.fail(f"{where}.dims.{name}", f"expected a size (an integer), got {strict.kind(size)}")
    for i, name in enumerate(strict.array(d["checked"], f"{path}.checked")):
        strict.string(name, f"{path}.checked[{i}]")
    for i, item in enumerate(strict.array(d["violations"], f"{path}.violations")):
        where = f"{path}.violations[{i}]"
        v = strict.obj(item, where, ("function", "param", "annotation", "got", "message", "source", "bindings"), ())
        for key in ("function", "param", "annotation", "got", "message"):
            strict.string(v[key], f"{where}.{key}")
        strict.array(v["bindings"], f"{where}.bindings")
        strict.obj(v["source"], f"{where}.source", ("path", "line", "column", "endLine", "endColumn"), ("cell",))
    copied: dict[str, Any] = strict.json_copy(d, path)
    return copied


def _compiled(data: Any, path: str) -> dict[str, Any]:
    """The ``compiled`` section (jaxlsp.graph.compiled reads it): the members readers rely on are
    checked, the rest copied whole."""
    d = strict.open_obj(data, path, ("platform",))
    strict.string(d["platform"], strict.join(path, "platform"))
    if d.get("error") is not None:
        strict.string(d["error"], strict.join(path, "error"))
    for i, item in enumerate(strict.array(d.get("collectives", []), strict.join(path, "collectives"))):
        where = f"{strict.join(path, 'collectives')}[{i}]"
        c = strict.open_obj(item, where, ("kind", "instruction", "shape", "bytes", "nodes", "scope", "source"))
        for key in ("kind", "instruction", "shape", "scope"):
            strict.string(c[key], strict.join(where, key))
        strict.integer(c["bytes"], strict.join(where, "bytes"), 0)
        for k, nid in enumerate(strict.array(c["nodes"], strict.join(where, "nodes"))):
            strict.string(nid, f"{strict.join(where, 'nodes')}[{k}]", nonempty=True)
        if c["source"] is not None:
            s = strict.open_obj(c["source"], strict.join(where, "source"), ("path", "line"))
            strict.string(s["path"], strict.join(where, "source.path"))
            strict.integer(s["line"], strict.join(where, "source.line"), 0)
    for i, item in enumerate(strict.array(d.get("modules", []), strict.join(path, "modules"))):
        where = f"{strict.join(path, 'modules')}[{i}]"
        m = strict.open_obj(item, where, ("scope", "flops", "bytes", "collectiveBytes", "collectives"))
        strict.string(m["scope"], strict.join(where, "scope"))
        for key in ("flops", "bytes", "collectiveBytes", "collectives"):
            strict.integer(m[key], strict.join(where, key), 0)
    copied: dict[str, Any] = strict.json_copy(d, path)
    return copied


_TIME_KEYS = ("platform", "device", "devices", "timeline", "repeat", "warmup", "step", "steps", "compile")
_TIME_FIGURES = ("busy", "attributed", "split", "nodes", "lines", "modules", "ops", "notes", "phases")


def _time(data: Any, path: str) -> dict[str, Any]:
    """The ``time`` section (jaxlsp.graph.timing): what readers total up is checked."""
    d = strict.obj(data, path, _TIME_KEYS + _TIME_FIGURES, ())

    def seconds(value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise strict.fail(where, f"expected seconds (a number >= 0), got {strict.kind(value)}")

    for key in ("step", "compile", "busy", "attributed"):
        seconds(d[key], strict.join(path, key))
    for key in ("repeat", "devices"):
        strict.integer(d[key], strict.join(path, key), 1)
    strict.integer(d["warmup"], strict.join(path, "warmup"), 0)
    for i, s in enumerate(strict.array(d["steps"], strict.join(path, "steps"))):
        seconds(s, f"{path}.steps[{i}]")
    nodes = d["nodes"]
    if not isinstance(nodes, dict):
        raise strict.fail(strict.join(path, "nodes"), f"expected an object, got {strict.kind(nodes)}")
    for nid, s in nodes.items():
        seconds(s, f"{path}.nodes.{nid}")
    for key, required, optional in (
        ("lines", ("path", "line", "seconds"), ("cell",)),
        ("modules", ("module", "seconds"), ()),
        ("ops", ("name", "opcode", "seconds", "count", "nodes"), ("via",)),
    ):
        for i, item in enumerate(strict.array(d[key], strict.join(path, key))):
            where = f"{path}.{key}[{i}]"
            strict.obj(item, where, required, optional)
            seconds(item["seconds"], f"{where}.seconds")
            if key == "ops":
                strict.strings(item["nodes"], f"{where}.nodes")
    strict.strings(d["notes"], strict.join(path, "notes"))
    phases = d["phases"]
    if not isinstance(phases, dict):
        raise strict.fail(strict.join(path, "phases"), f"expected an object, got {strict.kind(phases)}")
    for name, s in phases.items():
        seconds(s, f"{path}.phases.{name}")
    copied: dict[str, Any] = strict.json_copy(d, path)
    return copied


def _graph_costs(data: Any) -> dict[str, Any] | None:
    if data is None:
        return None
    d = strict.obj(data, "costs", ("platform",), _GRAPH_COST_KEYS)
    strict.string(d["platform"], "costs.platform")
    copied: dict[str, Any] = strict.json_copy(d, "costs")
    return copied


def _items(data: dict[str, Any], key: str, read: Any) -> list[Any]:
    return [read(item, f"{key}[{i}]") for i, item in enumerate(strict.array(data[key], key))]
