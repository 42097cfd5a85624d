"""Exactness of learned calls (issue 46): a trace that takes its inputs from what ``jaxlsp learn``
recorded is the graph a cold ``jaxlsp trace`` with the same inputs written by hand gives, whole,
for the everyday kinds: a Linen module with a config dataclass, a Block made of them, a plain
function with a static argument, an NNX layer and an Equinox cell. Only the profile's spelling
(a config field left at its default is left out) and the recipe file among the sources differ."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import expanded, run

pytest.importorskip("flax")
pytest.importorskip("equinox")

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "signatures"
CONFIG = '{ ref = "tinylm.layers:Config", kwargs = { width = 16, heads = 2, hidden = 32, layers = 2 } }'
BY_HAND = {  # what the workspace's tests call each target with, as a user would write it
    "tinylm/layers.py::Attention": f"init = {{ kwargs = {{ config = {CONFIG} }} }}\n"
    'inputs = { args = [{ kind = "array", shape = [2, 8, 16] }] }',
    "tinylm/layers.py::Block": f"init = {{ kwargs = {{ config = {CONFIG} }} }}\n"
    'inputs = { args = [{ kind = "array", shape = [2, 8, 16] }] }',
    "tinylm/layers.py::split_heads": 'inputs = { args = [{ kind = "array", shape = [2, 8, 16] }, 2] }',
    "tinylm/nnx_mlp.py::Layer": 'init = { args = [4, 8] }\ninputs = { args = [{ kind = "array", shape = [5, 4] }] }',
    "tinylm/eqx_cell.py::Cell": "init = { args = [6] }\n"
    'inputs = { args = [{ kind = "array", shape = [6] }, { kind = "array", shape = [6] }] }',
}


def _program(path: Path) -> dict[str, Any]:
    graph = expanded(path)
    return {k: v for k, v in graph.items() if k not in ("profile", "sources")}


def test_a_learned_call_traces_the_graph_a_hand_written_profile_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "signatures"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__", "jaxlsp.toml"))
    learned = run(["learn", "--idle", "3"], cwd=root)
    assert learned.returncode == 0, learned.stderr
    for target in BY_HAND:  # no profile yet: each from what the tests' run recorded
        name = target.partition("::")[2]
        traced = run(["trace", target, "-o", f"{name}.learned.json"], cwd=root)
        assert traced.returncode == 0, traced.stderr
        assert any(line.endswith("(learned)") for line in traced.stdout.splitlines()), traced.stdout

    recipe = ["version = 1"]
    for target, table in BY_HAND.items():
        name = target.partition("::")[2]
        recipe += ["", f"[profiles.{name}]", f'target = "{target}"', table]
    (root / "jaxlsp.toml").write_text("\n".join(recipe) + "\n")
    for target in BY_HAND:
        name = target.partition("::")[2]
        cold = run(["trace", target, "--profile", name, "-o", f"{name}.cold.json"], cwd=root)
        assert cold.returncode == 0, cold.stderr
        learned_graph, cold_graph = _program(root / f"{name}.learned.json"), _program(root / f"{name}.cold.json")
        assert learned_graph["nodes"], name
        assert learned_graph == cold_graph, name
