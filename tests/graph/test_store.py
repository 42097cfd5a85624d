"""The server's graph store reads relative graph paths back as absolute ones (issue 14: portable
graph files): workspace paths against the trace's base, library frames against their package's
sys.path entry."""

from __future__ import annotations

import copy
import gc
import hashlib
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from jaxlsp.graph import io
from jaxlsp.graph.diff import diff, diff_packed
from jaxlsp.graph.model import Frame, Graph, Node, Value
from jaxlsp.graph.packed import Packed
from jaxlsp.graph.store import GraphStore, Trace
from tests.graph.forms import graphs, realistic_graph, sample_graphs
from tests.graph.test_samples import small_graph


def _store(tmp_path: Path) -> tuple[GraphStore, str]:
    base = tmp_path / "ws"
    (base / "models").mkdir(parents=True)
    (base / "models" / "mlp.py").write_text("model")
    graph = small_graph()
    library = Frame("flax/linen/linear.py", 40, 4, 40, 30, "Dense.__call__", package="flax")
    here = Frame("models/mlp.py", 5, 8, 5, 20, "MLP.__call__")
    graph.nodes[0] = replace(graph.nodes[0], source=here, frames=[library, here])
    graph.sources = {"models/mlp.py": hashlib.sha256(b"model").hexdigest()}
    store = GraphStore()
    trace = store.add(graph, {"roots": {"base": str(base), "packages": {"flax": "/opt/site-packages"}}})
    return store, trace.id


def test_relative_paths_resolve_against_the_traces_roots(tmp_path: Path) -> None:
    store, trace_id = _store(tmp_path)
    trace = store.get(trace_id)
    assert trace is not None
    node = trace.graph.nodes[0]
    assert trace.frame_path(node.frames[0]) == "/opt/site-packages/flax/linen/linear.py"
    assert trace.frame_path(node.frames[1]) == str(tmp_path / "ws" / "models" / "mlp.py")
    absolute = str(tmp_path / "ws" / "models" / "mlp.py")
    assert trace.has_source(absolute) and [t.id for t in store.covering(absolute)] == [trace_id]
    assert [n.id for n in trace.nodes_at(absolute, 5)] == ["n0"]
    assert trace.stale_sources(lambda p: Path(p).read_text()) == []
    (tmp_path / "ws" / "models" / "mlp.py").write_text("edited")
    assert trace.stale_sources(lambda p: Path(p).read_text()) == [absolute]


def test_a_callers_line_in_the_same_file_holds_what_its_helper_computed() -> None:
    """``x = _block(x, w)`` calls a helper of the same file: the helper's operations belong to
    the caller's line as well as to the helper's own (issue 46.5; before, only to the innermost
    frame of each file, so the caller's line was dark), once each, the helper's own line first."""
    graph = small_graph()
    helper = Frame("model.py", 3, 4, 3, 20, "_block")
    caller = Frame("model.py", 9, 4, 9, 24, "model")
    library = Frame("jax/numpy/lax_numpy.py", 100, 4, 100, 9, "tanh", package="jax")
    graph.nodes[0] = replace(graph.nodes[0], source=helper, frames=[helper, library, caller])
    graph.nodes[1] = replace(graph.nodes[1], source=caller, frames=[caller])
    trace = GraphStore().add(graph, {})
    assert [n.id for n in trace.nodes_at("model.py", 3)] == ["n0"]
    assert [n.id for n in trace.nodes_at("model.py", 9)] == ["n1", "n0"]  # its own, then the helper's
    assert {3, 9} <= trace.lines_with_nodes("model.py") and 4 not in trace.lines_with_nodes("model.py")


def test_a_library_frame_never_matches_a_workspace_file_of_the_same_spelling(tmp_path: Path) -> None:
    store, trace_id = _store(tmp_path)
    trace = store.get(trace_id)
    assert trace is not None
    assert trace.nodes_at(str(tmp_path / "ws" / "flax" / "linen" / "linear.py"), 40) == []


def test_a_graph_without_roots_keeps_its_paths(tmp_path: Path) -> None:
    store = GraphStore()
    trace = store.add(small_graph(), {})
    assert trace.resolve("model.py") == "model.py" and trace.has_source("model.py")


def test_the_small_parts_need_no_whole_graph_and_a_whole_one_is_let_go_of_in_pieces() -> None:
    """A hover reads the measured time of every line: from the trace's small parts, never from
    :attr:`Trace.graph`, which makes every node (a 60,000-equation trace's, 0.6-0.9 s in the event
    loop, issue 25). A whole graph made for an export is emptied at the end of its block, a piece
    at a time (dropped at once, it held the GIL 55-80 ms)."""
    graph = small_graph()
    graph.time = {"step": 0.002, "repeat": 3, "nodes": {"n0": 0.001}}
    trace = GraphStore().add(graph, {})
    assert trace.time == graph.time
    with trace.whole() as whole:
        assert [n.id for n in whole.nodes] == [n.id for n in graph.nodes] and whole.time == graph.time
    assert whole.nodes == [] and whole.values == []


def reference_level(graph: Graph, group: str | None) -> list[tuple[str, str]]:
    """One level as the store pages it, by brute force: the nodes in ``group`` and its child groups
    (each where its first node anywhere inside it is), in program order."""
    groups = {g.id: g for g in graph.groups}

    def inside(node: Node, gid: str) -> bool:
        at, seen = node.group, set()
        while at is not None and at in groups and at not in seen:
            if at == gid:
                return True
            seen.add(at)
            at = groups[at].parent
        return False

    placed: list[tuple[int, int, tuple[str, str]]] = []
    for i, n in enumerate(graph.nodes):
        if n.group == group and (group is None or group in groups):
            placed.append((i, 1, ("node", n.id)))
    for g in graph.groups:
        if g.parent == group:
            first = next((i for i, n in enumerate(graph.nodes) if inside(n, g.id)), None)
            if first is not None:
                placed.append((first, 0, ("group", g.id)))
    return [item for _, _, item in sorted(placed)]


def reference_nodes_at(graph: Graph, path: str, line: int, cell: int | None) -> list[str]:
    """Every node one of whose workspace frames in ``path`` covers the line (a caller's line in
    the same file included), once, by its innermost such frame, then in program order."""
    found = []
    for i, n in enumerate(graph.nodes):
        depths = [
            depth
            for depth, f in enumerate(n.frames)
            if f.package is None and f.path == path and f.cell == cell and f.line <= line <= f.end_line
        ]
        if depths:
            found.append((min(depths), i, n.id))
    return [nid for _, _, nid in sorted(found)]


def check_store(graph: Graph) -> None:
    store = GraphStore()
    trace = store.add(copy.deepcopy(graph), {})
    for group in [None, *(g.id for g in graph.groups)]:
        items = []
        cursor = None
        while True:
            page = store.page(trace.id, group, cursor, 3)
            items += page["items"]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert [(i["kind"], i["id"]) for i in items] == reference_level(graph, group)
        for item in items:
            if item["kind"] == "node":
                node = trace.node(item["id"])
                assert node is not None
                assert item["primitive"] == node.primitive and item["scope"] == node.scope
                assert [o["id"] for o in item["outputs"]] == node.outputs
    for n in graph.nodes:
        assert trace.node(n.id) == n
    for v in graph.values:
        assert trace.value(v.id) == v
    assert trace.node("n-1") is None and trace.value("nope") is None
    places = {(f.path, f.cell, line) for n in graph.nodes for f in n.frames for line in (f.line, f.end_line)}
    for path, cell, line in sorted(places, key=repr):
        assert [n.id for n in trace.nodes_at(path, line, cell)] == reference_nodes_at(graph, path, line, cell)
    assert trace.graph == graph
    assert trace.node_count == len(graph.nodes) and trace.value_count == len(graph.values)
    assert diff_packed(trace.packed, trace.packed).json() == diff(graph, graph).json()


@pytest.mark.parametrize("index", range(len(sample_graphs())))
def test_the_stores_lookups_answer_as_the_graph_does(index: int) -> None:
    check_store(sample_graphs()[index])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), graphs())
def test_the_stores_lookups_and_diff_on_random_graphs(graph: Graph, other: Graph) -> None:
    check_store(graph)
    graph, other = (io.from_json(io.to_json(g)) for g in (graph, other))  # params' keys as files have them
    assert diff_packed(Packed.from_graph(other), Packed.from_graph(graph)).json() == diff(other, graph).json()


def test_a_kept_trace_holds_no_model_objects_and_a_few_bytes_an_equation() -> None:
    """A 20,000-equation trace kept by the store: no Node or Value objects live on (a 60,000-op
    graph as objects took hundreds of MB of the server), and what it holds is small."""
    graph = realistic_graph(20_000)
    data = io.to_compact(graph)
    del graph
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        trace = Trace("t", data, {})
        trace.line_index()
        trace.level_entries(None)
        del data
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert sum(isinstance(o, (Node, Value)) for o in gc.get_objects()) == 0
    assert held / 20_000 <= 300, f"{held / 20_000:.0f} bytes per equation held"
    assert trace.node("n19999") is not None  # materialised on demand


def _kept(store: GraphStore) -> list[str]:
    return [f"{t.meta['name']}{t.meta['n']}" for t in reversed(store._traces.values())]


def test_past_its_limit_the_store_keeps_the_newest_graph_of_each_target_within_its_budget() -> None:
    """Live shapes trace every target of the open files: with more targets than the store's limit,
    the oldest graph went though it was its target's only one, and the lines only it covered lost
    their shapes. An older graph of a target goes first; then, past the budget, the oldest."""
    graph = small_graph()
    size = len(graph.nodes)
    store = GraphStore(limit=2, budget=4 * size, targets=8)

    def add(name: str, n: int) -> None:
        store.add(graph, {"uri": f"file:///w/{name}.py", "name": name, "n": n})

    for name in "abc":
        add(name, 1)
    assert _kept(store) == ["c1", "b1", "a1"]  # three targets, each its newest graph
    add("a", 2)
    assert _kept(store) == ["a2", "c1", "b1"]  # a1 was superseded: it went first
    add("d", 1)
    add("e", 1)  # five graphs would pass the budget of four graphs' equations: the oldest goes
    assert _kept(store) == ["e1", "d1", "a2", "c1"]
    add("e", 2)
    add("e", 3)
    assert _kept(store) == ["e3", "d1", "a2", "c1"]
    assert store.latest("file:///w/b.py", "b") is None and store.latest("file:///w/c.py", "c") is not None
