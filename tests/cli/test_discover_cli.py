"""``jaxlsp discover PATH... --json``: the contract of DESIGN.md §3, through the console script."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli import helpers
from tests.discovery.helpers import write_tree
from tests.notebook.helpers import write_notebook

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return helpers.run(args, cwd, 120)


def test_examples_json(tmp_path: Path) -> None:
    result = run(["discover", "examples", "--json"], cwd=EXAMPLES.parent)
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)
    got = {(i["path"], i["name"], i["kind"]) for i in items}
    assert got == {
        ("examples/attention.py", "attention", "function"),
        ("examples/attention.py", "causal_mask", "function"),
        ("examples/attention.py", "cumulative", "function"),
        ("examples/eqx_mlp.py", "MLP", "equinox"),
        ("examples/eqx_mlp.py", "batched_loss", "function"),
        ("examples/eqx_scan.py", "ScanRNN", "equinox"),
        ("examples/jax_mlp.py", "mlp", "function"),
        ("examples/linen_cnn.py", "CNN", "linen"),
        ("examples/nnx_transformer.py", "FeedForward", "nnx"),
        ("examples/nnx_transformer.py", "TransformerBlock", "nnx"),
        ("examples/linen_mlp.py", "MLP", "linen"),
        ("examples/linen_mlp.py", "cross_entropy", "function"),
        ("examples/linen_mlp.py", "train_step", "function"),
        ("examples/nnx_cnn.py", "CNN", "nnx"),
        ("examples/nnx_cnn.py", "predict", "function"),
        ("examples/train_cnn.py", "accuracy", "function"),
        ("examples/blocks/base.py", "ResidualBlock", "linen"),
        ("examples/blocks/tower.py", "Tower", "linen"),
        ("examples/notebook_models.ipynb", "MLP", "linen"),
        ("examples/notebook_models.ipynb", "Attention", "nnx"),
        ("examples/notebook_models.ipynb", "Gated", "equinox"),
        ("examples/notebook_models.ipynb", "normalize", "function"),
    }
    for item in items:
        assert {"path", "name", "kind", "line", "end_line"} <= item.keys()
        if item["path"].endswith(".ipynb"):  # lines count within the cell the item names
            cells = json.loads((EXAMPLES.parent / item["path"]).read_text())["cells"]
            lines = "".join(cells[item["cell"]]["source"]).splitlines()
        else:
            lines = (EXAMPLES.parent / item["path"]).read_text().splitlines()
        keyword = "class " if item["kind"] != "function" else "def "
        assert lines[item["line"] - 1].lstrip().startswith(keyword), item
        assert item["line"] <= item["end_line"] <= len(lines)
        assert lines[item["end_line"] - 1].strip(), item


def test_paths_are_as_the_user_typed_them(tmp_path: Path) -> None:
    write_tree(tmp_path, {"proj/m.py": "import jax\n@jax.jit\ndef f(x):\n    return x\n", "proj/.venv/v.py": ""})
    here = run(["discover", "proj/m.py", "--json"], cwd=tmp_path)
    assert [i["path"] for i in json.loads(here.stdout)] == ["proj/m.py"]
    folder = run(["discover", "proj", "--json"], cwd=tmp_path)
    assert [i["path"] for i in json.loads(folder.stdout)] == ["proj/m.py"]
    dotted = run(["discover", "./proj", "--json"], cwd=tmp_path)
    assert [i["path"] for i in json.loads(dotted.stdout)] == ["proj/m.py"]
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    parent = run(["discover", "../proj", "--json"], cwd=sub)
    assert [i["path"] for i in json.loads(parent.stdout)] == ["../proj/m.py"]
    absolute = run(["discover", str(tmp_path / "proj"), "--json"], cwd=sub)
    assert [i["path"] for i in json.loads(absolute.stdout)] == [str(tmp_path / "proj" / "m.py")]


def test_human_output_and_errors(tmp_path: Path) -> None:
    write_tree(tmp_path, {"m.py": "import jax.numpy as jnp\ndef f(x):\n    return jnp.sum(x)\n"})
    result = run(["discover", "m.py"], cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "m.py:2: function f"
    missing = run(["discover", "nope.py"], cwd=tmp_path)
    assert missing.returncode == 2 and "nope.py" in missing.stderr


def test_notebooks_give_cell_and_line_within_it(tmp_path: Path) -> None:
    cells = [
        ("markdown", "# A notebook"),
        ("code", "%pip install flax\nimport jax\nimport flax.linen as nn"),
        ("code", "class Net(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(2)(x)"),
        ("markdown", "Then a function."),
        ("code", "x = 1\n\n@jax.jit\ndef f(x):\n    return x * 2\n"),
    ]
    write_notebook(tmp_path / "nb.ipynb", cells)
    result = run(["discover", "nb.ipynb", "--json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    got = [(i["path"], i["name"], i["cell"], i["line"], i["end_line"]) for i in json.loads(result.stdout)]
    assert got == [("nb.ipynb", "Net", 2, 1, 4), ("nb.ipynb", "f", 4, 4, 5)]
    human = run(["discover", "."], cwd=tmp_path)
    assert human.stdout.splitlines() == ["nb.ipynb:cell 2:1: linen    Net", "nb.ipynb:cell 4:4: function f"]
