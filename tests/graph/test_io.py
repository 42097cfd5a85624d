"""The graph's JSON forms in and out (jaxlsp.graph.io): round trips of either form through text and
files, the earlier workers' pipe form read back, writes in few big pieces."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from jaxlsp.graph import io
from jaxlsp.graph.expanded_write import to_frame_table
from jaxlsp.graph.model import FRAME_TABLE, Graph
from jaxlsp.graph.validate import check
from tests.graph.forms import graphs, odd_graph, schema_errors, sharded, with_values
from tests.graph.test_samples import chain_graph, small_graph


def test_json_form_validates_and_round_trips() -> None:
    graph = small_graph()
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert io.from_json(data) == graph
    assert io.loads(io.dumps(graph)) == graph
    assert io.from_json(json.loads(json.dumps(data))) == graph


def test_dumps_is_compact_and_deterministic() -> None:
    a = small_graph()
    b = small_graph()
    b.nodes[0].params = dict(reversed(list(b.nodes[0].params.items())))
    b.target = dict(reversed(list(b.target.items())))
    assert io.dumps(a) == io.dumps(b)
    text = io.dumps(a)
    assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)


def test_write_and_read(tmp_path: Path) -> None:
    graph = small_graph()
    graph.target["path"] = "modèle/ü.py"  # non-ASCII survives as UTF-8
    path = tmp_path / "graph.json"
    io.write(graph, path)
    assert io.read(path) == graph
    assert json.loads(path.read_text(encoding="utf-8"))["target"]["path"] == "modèle/ü.py"
    assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]  # no temporary file left behind


def test_a_big_graph_round_trips() -> None:
    graph = chain_graph(2000, group_every=10)
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert io.loads(io.dumps(graph)) == graph


def test_version_1_files_and_the_earlier_transport_still_load(tmp_path: Path) -> None:
    graph = odd_graph()
    path = tmp_path / "old.json"
    path.write_text(json.dumps(io.to_json(graph)), encoding="utf-8")  # a file written before version 2
    assert io.read(path) == graph
    assert io.from_json(to_frame_table(graph)) == graph
    io.write(graph, path, compact=True)
    assert json.loads(path.read_text())["version"] == 2 and io.read(path) == graph


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_round_trip(graph: Graph) -> None:
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert check(graph) == []
    assert io.loads(io.dumps(graph)) == graph


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_the_packed_transport_reads_back_the_same_graph(graph: Graph) -> None:
    assert FRAME_TABLE not in io.to_json(graph)  # never in the file format
    for packed in (io.to_compact(graph), to_frame_table(graph)):  # today's and earlier workers'
        assert io.from_json(json.loads(json.dumps(packed))) == graph


def test_statistics_and_execution_round_trip_and_validate() -> None:
    graph = with_values(small_graph())
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert data["values"][1]["stats"]["mean"] == {"float": "inf"}
    assert list(data)[-1] == "execution"
    assert io.from_json(data) == graph
    assert io.from_json(json.loads(io.dumps(graph))) == graph
    # A graph without them writes neither key, and reads back without them.
    plain = io.to_json(small_graph())
    assert "execution" not in plain and all("stats" not in v for v in plain["values"])
    assert io.from_json(plain).execution is None


def test_shardings_and_the_mesh_round_trip_and_validate() -> None:
    graph = sharded(small_graph())
    data = io.to_json(graph)
    assert schema_errors(data) == []
    assert data["mesh"] == graph.mesh and data["values"][0]["sharding"]["spec"][0] == ["x", "y"]
    assert io.from_json(data) == graph
    assert io.from_json(json.loads(io.dumps(graph))) == graph
    # A graph on one device writes neither key, and reads back without them.
    plain = io.to_json(small_graph())
    assert "mesh" not in plain and all("sharding" not in v for v in plain["values"])
    assert io.from_json(plain).mesh is None


def test_a_graph_written_in_pieces_goes_out_in_few_big_writes(tmp_path: Path) -> None:
    """A write per row let the GIL go and come back at every 8 KiB flush, and the server's event
    loop, waiting for it beside an exporting thread, starved for up to 1.1 s (issue 25)."""
    import io as stdio

    class Writes(stdio.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.sizes: list[int] = []

        def write(self, text: str) -> int:
            self.sizes.append(len(text))
            return super().write(text)

    pieces = [f'{{"id":"n{i}"}},' for i in range(100_000)]
    out = Writes()
    io._write_pieces(out, iter(pieces))
    assert out.getvalue() == "".join(pieces)
    assert len(out.sizes) <= 1 + sum(map(len, pieces)) // io.WRITE_BATCH  # 1.4 MB: 6 writes, not 100,000
    assert all(size >= io.WRITE_BATCH for size in out.sizes[:-1])
    path = tmp_path / "g.json"
    io.write_text(iter(pieces), path)
    assert path.read_text(encoding="utf-8") == "".join(pieces)
