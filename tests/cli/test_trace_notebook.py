"""``jaxlsp trace nb.ipynb::NAME`` through the console script: a Linen, an NNX, an Equinox and a
function target defined in a notebook's cells, traced on real JAX (CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from jaxlsp.graph import io
from jaxlsp.graph.validate import SCHEMA_PATH, check
from jaxlsp.notebook import read_module
from tests.cli.helpers import expanded
from tests.deadlines import scaled

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "notebooks"
NOTEBOOK = WORKSPACE / "models.ipynb"
# target -> (kind, its cell, a line of it that makes an operation, the output type)
TARGETS = {
    "Dense2": ("linen", 5, "        h = nn.relu(nn.Dense(self.features)(x))", "f32[4,3]"),
    "Scale": ("nnx", 6, "        y = self.linear(x)", "f32[4,16]"),
    "Gate": ("equinox", 8, "        return jax.nn.sigmoid(z) * x", "f32[16]"),
    "softmax_rows": ("function", 9, "    e = jnp.exp(shifted)", "f32[2,5]"),
}


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxlsp", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    out = tmp_path_factory.mktemp("notebook")
    return {
        name: (
            run(["trace", f"models.ipynb::{name}", "-o", str(out / f"{name}.json")], WORKSPACE),
            out / f"{name}.json",
        )
        for name in TARGETS
    }


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_notebook_target_traces_with_frames_in_its_cell(
    traced: dict[str, tuple[subprocess.CompletedProcess[str], Path]], name: str
) -> None:
    kind, cell, line_text, output = TARGETS[name]
    result, path = traced[name]
    assert result.returncode == 0, result.stderr
    assert output in result.stdout
    # the IPython lines of the cells above are listed, not run
    assert "IPython lines not run" in result.stdout and "cell 1 line 3: !pip install --quiet equinox" in result.stdout
    data = expanded(path)
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    graph = io.from_json(data)
    assert check(graph) == []
    assert graph.target == {"path": "models.ipynb", "name": name, "kind": kind, "cell": cell}  # relative
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    in_notebook = [f for n in graph.nodes for f in n.frames if f.path == "models.ipynb"]
    assert in_notebook and all(f.cell == cell for f in in_notebook)
    lines = {"".join(cells[f.cell]["source"]).split("\n")[f.line - 1] for f in in_notebook}
    assert line_text in lines
    # freshness: the code cells' text, as the server's index reads the notebook
    assert graph.sources["models.ipynb"] == read_module(NOTEBOOK.read_text()).digest()


def test_a_notebook_target_without_a_profile_gets_one_proposed(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text(NOTEBOOK.read_text())
    result = run(["trace", "nb.ipynb::softmax_rows"], tmp_path)
    assert result.returncode == 3, result.stderr
    assert 'target = "nb.ipynb::softmax_rows"' in result.stderr
