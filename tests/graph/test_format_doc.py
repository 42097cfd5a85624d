"""docs/graph-format.md tracks the schema: its example is valid, every schema key is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from jaxlsp.graph import io
from jaxlsp.graph.validate import check, load_compact_schema, load_schema

DOC = (Path(__file__).resolve().parents[2] / "docs" / "graph-format.md").read_text(encoding="utf-8")


def test_the_example_is_a_valid_graph() -> None:
    blocks = re.findall(r"```json\n(.*?)```", DOC, re.S)
    assert len(blocks) == 2  # the example, and the same graph in the compact form
    data = json.loads(blocks[0])
    assert list(Draft202012Validator(load_schema()).iter_errors(data)) == []
    graph = io.from_json(data)
    assert check(graph) == []
    assert io.to_json(graph) == data
    compact = json.loads(blocks[1])
    registry = Registry().with_resource(load_schema()["$id"], Resource.from_contents(load_schema()))
    assert list(Draft202012Validator(load_compact_schema(), registry=registry).iter_errors(compact)) == []
    assert io.to_compact(graph) == compact and io.from_json(compact) == graph


def _keys(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        found.update(schema.get("properties", {}))
        found.update(schema.get("required", []))
        for value in schema.values():
            found |= _keys(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _keys(value)
    return found


def test_every_schema_key_is_documented() -> None:
    for key in sorted(_keys(load_schema()) | _keys(load_compact_schema())):
        assert f"`{key}`" in DOC or f"{key}," in DOC or f"{key}}}" in DOC, f"{key} is not in docs/graph-format.md"
