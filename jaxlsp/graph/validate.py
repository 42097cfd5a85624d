"""Structural checks of a :class:`~jaxlsp.graph.model.Graph`: referential integrity, cheap enough to run always.

Stdlib only, Python >= 3.10. ``check`` complements the JSON Schema (``schema.json``, which fixes
the shape of each record) with what a schema cannot say: that ids are unique and every
reference points at something that exists and agrees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jaxlsp.graph.model import INPUT_ROLES, OUTPUT_ROLES, VALUE_KINDS, Frame, Graph

SCHEMA_PATH = Path(__file__).with_name("schema.json")
# The compact form (version 2): its columns, and the version 1 schema's members by reference
# (``urn:jaxlsp:graph:1#/...``), so a validator needs both documents.
COMPACT_SCHEMA_PATH = Path(__file__).with_name("schema-compact.json")

_INPUT_ROLES = frozenset(INPUT_ROLES)
_OUTPUT_ROLES = frozenset(OUTPUT_ROLES)
_VALUE_KINDS = frozenset(VALUE_KINDS)
MAX_PROBLEMS = 100  # a broken graph can have one problem per node: report the first ones


def load_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the graph file."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def load_compact_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the compact form; it refers to :func:`load_schema`'s
    document by its ``$id``."""
    schema: dict[str, Any] = json.loads(COMPACT_SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def _frame_problem(frame: Frame) -> str | None:
    if frame.line < 1 or frame.end_line < frame.line:
        return f"lines {frame.line}..{frame.end_line} are not an ordered 1-based range"
    if frame.column < 0 or frame.end_column < 0:
        return "negative column"
    if frame.end_line == frame.line and frame.end_column < frame.column:
        return f"end column {frame.end_column} before column {frame.column}"
    return None


def check(graph: Graph) -> list[str]:
    """Problems found in ``graph`` (at most ``MAX_PROBLEMS``), each a sentence naming the ids; [] when sound."""
    problems: list[str] = []

    def add(message: str) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(message)

    nodes = {}
    for node in graph.nodes:
        if node.id in nodes:
            add(f"node id {node.id} is used twice")
        nodes[node.id] = node
    values = {}
    for value in graph.values:
        if value.id in values:
            add(f"value id {value.id} is used twice")
        values[value.id] = value
    groups = {}
    for group in graph.groups:
        if group.id in groups:
            add(f"group id {group.id} is used twice")
        groups[group.id] = group

    produced_by: dict[str, str] = {}
    for node in graph.nodes:
        for vid in node.inputs:
            if vid not in values:
                add(f"node {node.id} ({node.primitive}) reads missing value {vid}")
        for vid in node.outputs:
            if vid not in values:
                add(f"node {node.id} ({node.primitive}) writes missing value {vid}")
                continue
            if vid in produced_by and produced_by[vid] != node.id:
                add(f"value {vid} is an output of both {produced_by[vid]} and {node.id}")
            produced_by[vid] = node.id
            if values[vid].producer != node.id:
                add(f"value {vid} is an output of node {node.id} but names producer {values[vid].producer}")
        if node.group is not None and node.group not in groups:
            add(f"node {node.id} is in missing group {node.group}")
        for where, frame in [("source", node.source), *(("frames", f) for f in node.frames)]:
            if frame is not None:
                problem = _frame_problem(frame)
                if problem:
                    add(f"node {node.id} {where} {frame.path}: {problem}")

    for value in graph.values:
        if value.kind not in _VALUE_KINDS:
            add(f"value {value.id} has unknown kind {value.kind!r}")
        if value.producer is None:
            continue
        if value.kind != "var":
            add(f"{value.kind} value {value.id} names producer {value.producer}")
        if value.producer not in nodes:
            add(f"value {value.id} names missing producer {value.producer}")
        elif produced_by.get(value.id) != value.producer:
            add(f"value {value.id} names producer {value.producer}, which does not list it as an output")

    for label, ports, roles in (("input", graph.inputs, _INPUT_ROLES), ("output", graph.outputs, _OUTPUT_ROLES)):
        for port in ports:
            if port.value not in values:
                add(f"graph {label} {port.label!r} refers to missing value {port.value}")
            if port.role not in roles:
                add(f"graph {label} {port.label!r} has unknown role {port.role!r}")

    for group in graph.groups:
        if group.parent is not None and group.parent not in groups:
            add(f"group {group.id} has missing parent {group.parent}")
        if group.node is not None and group.node not in nodes:
            add(f"group {group.id} is owned by missing node {group.node}")
    # Parents form a tree: walking up from any group ends at the top without revisiting a group.
    done: set[str] = set()
    for group in graph.groups:
        path: list[str] = []
        on_path: set[str] = set()
        gid: str | None = group.id
        while gid is not None and gid in groups and gid not in done:
            if gid in on_path:
                cycle = path[path.index(gid) :]
                add(f"groups {' -> '.join([*cycle, gid])} form a cycle")
                break
            path.append(gid)
            on_path.add(gid)
            gid = groups[gid].parent
        done.update(path)

    for item in graph.coverage.opaque:
        nid = item.get("node")
        if nid not in nodes:
            add(f"coverage lists missing node {nid} as opaque")
    if graph.coverage.complete and graph.coverage.opaque:
        add("coverage is complete although opaque regions are listed")
    return problems
