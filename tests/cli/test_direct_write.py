"""``jaxlsp trace -o`` writes the worker's compact form as it came, checked (graph/compact.py
``CompactFile``), and prints the summary from its columns: no node or value of the graph is made
as a model object on the way (at 100,000 equations the decode and the encode back were 20 s of
a 125 s cold trace). The file is the one ``io.write(graph, compact=True)`` writes, and its
expansion is ``--expanded``'s file."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlsp import cli
from jaxlsp.graph import io
from jaxlsp.graph.report import render_summary
from tests.graph.rows import count_made

MODEL = (
    "import jax.numpy as jnp\n\n\ndef g(x):\n    for _ in range(150):\n        x = jnp.sin(jnp.cos(x))\n    return x\n"
)
RECIPE = 'version = 1\n\n[profiles.g]\ntarget = "model.py::g"\ninputs.args = [{ kind = "array", shape = [3] }]\n'


def test_the_default_file_is_written_without_a_model_object_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "jaxlsp.toml").write_text(RECIPE)
    monkeypatch.chdir(tmp_path)
    with monkeypatch.context() as patched:
        made = count_made(patched)
        assert cli.main(["trace", "model.py::g", "--profile", "g", "-o", "g.json"]) == 0
    printed = capsys.readouterr().out
    assert "Node" not in made and made.count("Value") <= 2, made[:5]  # the two ports' shapes, no more
    text = (tmp_path / "g.json").read_text(encoding="utf-8")
    graph = io.read(tmp_path / "g.json")
    assert len(graph.nodes) == 300
    assert text == io.dumps(graph, compact=True)  # byte for byte what io.write writes of it
    assert printed.startswith(render_summary(graph) + "\n")  # the summary the decoded graph gives

    # The expanded form of that file is --expanded's file, and both are what the tools read.
    assert cli.main(["trace", "model.py::g", "--profile", "g", "-o", "e.json", "--expanded"]) == 0
    assert cli.main(["export", "g.json", "--format", "json", "-o", "x.json"]) == 0
    assert (tmp_path / "x.json").read_bytes() == (tmp_path / "e.json").read_bytes()
    assert io.read(tmp_path / "e.json") == graph
