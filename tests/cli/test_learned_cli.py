"""Inputs learned at every call boundary (issue 46): one ``jaxlsp trace`` of a model keeps the call
of each block, layer and helper it ran (capture/inputs/signatures.py), and a later trace of one of them,
with no profile of its own, uses that call, says so, and saves it; a change to the caller's file
drops it."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import expanded, run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "signatures"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "signatures"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _output_shapes(path: Path) -> list[list[int]]:
    data = expanded(path)
    shapes = {v["id"]: v["shape"] for v in data["values"]}
    return [shapes[o["value"]] for o in data["outputs"]]


def test_a_trace_of_the_model_teaches_its_layers_which_then_trace_with_no_profile(repo: Path, cache: Path) -> None:
    model = run(["trace", "tinylm/model.py::Transformer"], cwd=repo)
    assert model.returncode == 0, model.stderr
    assert list((cache / "jaxlsp" / "signatures").glob("*.json"))  # kept in the per-user cache
    assert not list(repo.rglob("*signature*"))  # and nothing in the workspace

    layer = run(["trace", "tinylm/layers.py::Attention", "-o", "attention.json", "--save"], cwd=repo)
    assert layer.returncode == 0, layer.stderr
    # Block calls it (tinylm/layers.py:52), Transformer calls Block (tinylm/model.py:16)
    assert "inputs from a learned call at tinylm/layers.py:52 (learned)" in layer.stdout.splitlines()
    assert "to learn the inputs" not in layer.stdout  # nothing of the workspace ran but the layer
    assert _output_shapes(repo / "attention.json") == [[2, 8, 16]]
    saved = tomllib.loads((repo / "jaxlsp.toml").read_text())["profiles"]
    attention = next(t for t in saved.values() if t["target"] == "tinylm/layers.py::Attention")
    assert attention["inputs"] == {"args": [{"kind": "array", "shape": [2, 8, 16]}]}

    helper = run(["trace", "tinylm/layers.py::split_heads", "-o", "heads.json"], cwd=repo)
    assert helper.returncode == 0, helper.stderr
    assert _output_shapes(repo / "heads.json") == [[2, 8, 2, 8]]  # the static head count came along


def test_a_changed_caller_drops_what_it_taught(repo: Path, cache: Path) -> None:
    assert run(["trace", "tinylm/model.py::Transformer"], cwd=repo).returncode == 0
    before = run(["trace", "tinylm/layers.py::FeedForward"], cwd=repo)
    assert "inputs from a learned call at tinylm/layers.py:53 (learned)" in before.stdout.splitlines()
    model = repo / "tinylm" / "model.py"
    model.write_text(model.read_text().replace("self.config.width)(tokens)", "self.config.width)(tokens) * 2"))
    block = run(["trace", "tinylm/layers.py::FeedForward", "--from", "auto"], cwd=repo)
    assert "(learned)" not in block.stdout  # the call it recorded may no longer be made
    assert os.environ["XDG_CACHE_HOME"] == str(cache)


def test_learn_runs_the_tests_and_documented_scripts_once_and_every_reached_target_traces(
    repo: Path, cache: Path
) -> None:
    (repo / "jaxlsp.toml").unlink()  # no profile at all: everything comes from the workspace's own runs
    learned = run(["learn", "--json", "--idle", "3"], cwd=repo)
    assert learned.returncode == 0, learned.stderr
    report = json.loads(learned.stdout)
    assert set(report["targets"]) >= {
        "tinylm/model.py::Transformer",
        "tinylm/layers.py::Block",
        "tinylm/layers.py::Attention",
        "tinylm/layers.py::FeedForward",
        "tinylm/layers.py::rms_norm",
        "tinylm/nnx_mlp.py::MLP",
        "tinylm/nnx_mlp.py::Layer",
        "tinylm/eqx_cell.py::Recurrent",
        "tinylm/eqx_cell.py::Cell",
    }
    outcomes = {e["text"]: e["outcome"] for e in report["examples"]}
    # the tests ran to their end; the training script (README: --steps 1000000) was stopped once idle
    assert outcomes == {"tests/test_model.py": "finished", "train.py --steps 1000000": "stopped"}
    assert report["failures"] == []
    layer = run(["trace", "tinylm/nnx_mlp.py::Layer", "-o", "layer.json"], cwd=repo)
    assert layer.returncode == 0, layer.stderr
    assert "inputs from a learned call at tinylm/nnx_mlp.py:21 (learned)" in layer.stdout.splitlines()
    assert _output_shapes(repo / "layer.json") == [[5, 8]]  # the first layer, as the test's model called it


def _src_layout(tmp_path: Path, init: str) -> Path:
    """A repository whose package ``kernels`` lies in ``src/`` (its ``__init__`` says ``init``),
    not installed, with an empty ``tests/``."""
    root = tmp_path / "srcpkg"
    (root / "src" / "kernels").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'kernels'\n")
    (root / "src" / "kernels" / "__init__.py").write_text(init)
    return root


def _learned_cleanly(root: Path) -> dict[str, Any]:
    """``jaxlsp learn --json`` on ``root``: its report, every example run without a failure."""
    learned = run(["learn", "--json", "--idle", "3"], cwd=root)
    assert learned.returncode == 0, learned.stderr
    report: dict[str, Any] = json.loads(learned.stdout)
    assert report["failures"] == [], report["failures"]
    return report


def test_learn_runs_the_tests_of_a_src_layout_package_that_is_not_installed(tmp_path: Path, cache: Path) -> None:
    """tinygp keeps its package in ``src/tinygp`` and its tests ``import tinygp``: with the
    package not installed (a fresh clone), every test file failed at collection with "No module
    named 'tinygp'". An editable install puts ``src/`` on the path; a learning run does too (last,
    so that an installed package still wins)."""
    root = _src_layout(tmp_path, "from kernels.gram import gram as gram\n")
    (root / "src" / "kernels" / "gram.py").write_text(
        "import jax.numpy as jnp\n\n\ndef gram(x):\n    return jnp.exp(-((x[:, None] - x[None]) ** 2).sum(-1))\n"
    )
    (root / "tests" / "test_gram.py").write_text(
        "import jax.numpy as jnp\nimport kernels\n\n\ndef test_gram():\n"
        "    assert kernels.gram(jnp.ones((4, 3))).shape == (4, 4)\n"
    )
    report = _learned_cleanly(root)
    assert report["targets"] == ["src/kernels/gram.py::gram"]


def test_learn_records_a_helper_defined_in_a_test_file_which_then_traces(tmp_path: Path, cache: Path) -> None:
    """pytest imports a test file with its assertion-rewriting loader, which the signature hooks
    did not reach: a helper defined in the test file and called by its test (tinygp's
    ``direct_covariance``) was never learned. Its trace then imports the src layout's package."""
    root = _src_layout(tmp_path, "WIDTH = 3\n")
    (root / "tests" / "test_fused.py").write_text(
        "import jax.numpy as jnp\nfrom kernels import WIDTH\n\n\n"
        "import pytest\n\n\n"
        "def fused(x, scale):\n    return jnp.tanh(jnp.tile(x, WIDTH)) * scale\n\n\n"
        "@pytest.fixture\ndef data():\n    return jnp.ones((4, 2))\n\n\n"
        "def test_fused(data):\n    assert fused(data, 2.0).shape == (4, 6)\n    assert jnp.all(data == 1)\n"
    )
    report = _learned_cleanly(root)
    assert "tests/test_fused.py::fused" in report["targets"]
    # the test function itself is pytest's to call, with its fixtures: never a learned target
    assert "tests/test_fused.py::test_fused" not in report["targets"]
    traced = run(["trace", "tests/test_fused.py::fused", "-o", "fused.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "inputs from a learned call at tests/test_fused.py:18 (learned)" in traced.stdout.splitlines()
    assert _output_shapes(root / "fused.json") == [[4, 6]]
