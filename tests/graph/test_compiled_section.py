"""The graph's ``compiled`` section read back and rendered (jaxlsp.graph.compiled, io): the
``collectives:`` line for none, several and a failed compile, the module table, strict reading."""

from __future__ import annotations

from typing import Any

import pytest

from jaxlsp.graph import compiled, io
from jaxlsp.graph.model import Coverage, Graph


def _graph(section: dict[str, Any] | None) -> Graph:
    return Graph(
        target={"path": "m.py", "name": "f", "kind": "function"},
        profile={"name": None},
        versions={"jax": None, "jaxlib": None, "flax": None, "equinox": None, "python": None},
        coverage=Coverage(),
        sources={},
        inputs=[],
        outputs=[],
        nodes=[],
        values=[],
        groups=[],
        compiled=section,
    )


def _collective(kind: str, line: int, scope: str, nbytes: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "instruction": f"{kind}.{line}",
        "shape": "f32[8]",
        "bytes": nbytes,
        "nodes": ["n0"],
        "scope": scope,
        "source": {"path": "model.py", "line": line, "column": 0, "endLine": line, "endColumn": 3},
    }


def test_the_collectives_line_groups_by_kind_line_and_module() -> None:
    section = {
        "platform": "cpu",
        "devices": 4,
        "collectives": [
            _collective("all-reduce", 8, "Dense_0", 1024),
            _collective("all-gather", 12, "Dense_1", 2048),
            _collective("all-gather", 12, "Dense_1", 4096),
        ],
        "modules": [{"scope": "", "flops": 10, "bytes": 20, "collectiveBytes": 7168, "collectives": 3}],
    }
    graph = _graph(section)
    assert compiled.collectives_line(graph) == (
        "collectives: all-reduce \u00d71 (1.0 KiB) at model.py:8 Dense_0; all-gather \u00d72 (6.0 KiB) at model.py:12 Dense_1"
    )
    text = compiled.render(graph).splitlines()
    assert text[0].startswith("collectives: ") and "compiled for 4 cpu device(s): 0 fused kernel(s)" in text
    assert text[-1].split() == ["(whole", "program)", "10", "20", "7,168"]
    summary = compiled.summary_json(graph)
    assert summary is not None and summary["groups"][1] == {
        "kind": "all-gather",
        "where": "model.py:12",
        "scope": "Dense_1",
        "count": 2,
        "bytes": 6144,
    }
    assert io.from_json(io.to_json(graph)).compiled == section  # round trip


def test_none_a_failed_compile_and_no_compile_are_said_plainly() -> None:
    assert compiled.collectives_line(_graph({"platform": "cpu", "collectives": []})) == "collectives: none"
    failed = _graph({"platform": "cpu", "error": "XlaRuntimeError: out of memory"})
    assert (
        compiled.collectives_line(failed) == "collectives: unknown, the compile failed: XlaRuntimeError: out of memory"
    )
    summary = compiled.summary_json(failed)
    assert summary is not None and summary["error"] == "XlaRuntimeError: out of memory"
    assert summary["text"][0] == summary["collectives"] == compiled.collectives_line(failed)
    assert set(summary) == {"collectives", "text", "error"}
    # without XLA's schedule, the traced program's liveness walk still says the peak
    assert (
        compiled.render(failed)
        .splitlines()[1]
        .startswith("memory per device, estimated (the traced program's liveness walk; every")
    )
    assert compiled.collectives_line(_graph(None)) == "collectives: not measured (trace with --compiled)"
    assert compiled.summary_json(_graph(None)) is None


def test_a_malformed_section_is_refused_with_its_key_path() -> None:
    data = io.to_json(_graph({"platform": "cpu", "collectives": [_collective("all-reduce", 8, "", 64)]}))
    data["compiled"]["collectives"][0]["bytes"] = "64"
    with pytest.raises(ValueError, match=r"compiled\.collectives\[0\]\.bytes"):
        io.from_json(data)
    del data["compiled"]["platform"]
    with pytest.raises(ValueError, match="compiled"):
        io.from_json(data)
