"""The server's graph store reads relative graph paths back as absolute ones (issue 14: portable
graph files): workspace paths against the trace's base, library frames against their package's
sys.path entry."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from jaxlsp.graph.model import Frame
from jaxlsp.graph.store import GraphStore
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
