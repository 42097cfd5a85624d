"""The worker's compact form checked and written as it came (``compact.CompactFile``, what
``jaxlsp trace -o`` writes): the same text ``io.write(graph, compact=True)`` writes of the graph it
reads to, the same refusals as ``io.from_json``, the same summary, without a model object per
node and value."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from jaxlsp.graph import io
from jaxlsp.graph.compact import CompactFile
from jaxlsp.graph.model import Graph
from jaxlsp.graph.report import render_summary
from tests.graph.forms import corrupt, graphs, sample_graphs
from tests.graph.forms import realistic_graph as realistic_graph  # benchmarks/graph_store.py imports it from here
from tests.graph.rows import count_made
from tests.graph.test_samples import small_graph


def check_file(graph: Graph) -> None:
    sent = json.loads(io.dumps(graph, compact=True))  # as the pipe brings it
    decoded = io.from_json(json.loads(json.dumps(sent)))  # what the CLI wrote and summed up before
    made = CompactFile(sent)
    assert made.text() == io.dumps(decoded, compact=True)  # byte for byte what io.write writes
    assert made.graph == replace(decoded, nodes=[], values=[])
    assert render_summary(made.graph, made.packed.rows()) == render_summary(decoded)


@pytest.mark.parametrize("index", range(len(sample_graphs())))
def test_the_file_of_every_sample_graph_is_what_io_writes(index: int) -> None:
    check_file(sample_graphs()[index])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_the_file_of_random_graphs_is_what_io_writes(graph: Graph) -> None:
    check_file(graph)


def test_rows_without_optional_members_are_never_made(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = sample_graphs()[-1]  # the transformer-shaped one: no literals, no costs
    sent = json.loads(io.dumps(graph, compact=True))
    made = count_made(monkeypatch)
    file = CompactFile(sent)
    assert made == []
    summary = render_summary(file.graph, file.packed.rows())
    assert made == ["Value"] * len({p.value for p in graph.inputs + graph.outputs})  # the ports' shapes
    assert summary.splitlines()[2].startswith(f"{len(graph.nodes):,} ops")


def _sound() -> dict[str, Any]:
    return io.to_compact(small_graph())


def _empty_string(kind: str) -> dict[str, Any]:
    data = _sound()
    column = data["nodes"]["primitive"] if kind == "primitive" else data["values"]["dtype"]
    data["tables"]["strings"][column[3]] = ""
    return data


def _with(change: Any) -> dict[str, Any]:
    data = _sound()
    change(data)
    return data


MALFORMED = {
    "an index out of its table": corrupt("nodes.primitive[2]", 99),
    "a column of the wrong length": corrupt("nodes.params", [0]),
    "a frame line of 0": corrupt("tables.frames[1]", 0),
    "a literal that is not JSON": corrupt("values.extra.literal", [[7, float("nan")]]),
    "an empty primitive": _empty_string("primitive"),
    "an empty dtype": _empty_string("dtype"),
    "a non-finite param": _with(lambda d: d["tables"]["params"].append({"fill": float("nan")})),
    "a node's costs without bytes": _with(lambda d: d["nodes"]["extra"].update(costs=[[3, {"flops": 1}]])),
    "a node member no version knows": _with(lambda d: d["nodes"]["extra"].update(bogus=[[0, 1]])),
    "a value's stats that are not stats": _with(lambda d: d["values"]["extra"].update(stats=[[0, {"n": 1}]])),
    "an input port's unknown role": _with(lambda d: d["inputs"][0].update(role="weights")),
    "a group without a kind": _with(lambda d: d["groups"][0].update(kind="")),
    "an unknown section": _with(lambda d: d.update(extras={})),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_what_from_json_refuses_is_refused(case: str) -> None:
    data = MALFORMED[case]
    if case == "a non-finite param":  # a node uses it, as the worker's own table would
        data["nodes"]["params"][0] = len(data["tables"]["params"]) - 1
    with pytest.raises(ValueError) as decoded:
        io.from_json(json.loads(json.dumps(data)))
    with pytest.raises(ValueError) as checked:
        CompactFile(json.loads(json.dumps(data)))
    if case == "a non-finite param":  # checked once in its table, not at each node using it
        assert str(checked.value) == str(decoded.value).replace("nodes[0].params", "tables.params[4]")
    else:
        assert str(checked.value) == str(decoded.value)  # the same key path, the same words
