"""``jaxlsp examples`` and ``jaxlsp trace --from auto|PATH[::TEST] [--save]`` through the console
script, on a copy of a repository laid out like a real one (tests/workspaces/callsites_repo)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import jsonschema
import pytest

from jaxlsp.graph.validate import SCHEMA_PATH
from tests.cli.helpers import expanded, run

REPO = Path(__file__).resolve().parents[1] / "workspaces" / "callsites_repo"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "callsites_repo"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_examples_lists_ranked_call_sites(repo: Path) -> None:
    result = run(["examples", "zoo/resnet.py::ResNet"], cwd=repo)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line[:1].isdigit()]
    assert (
        lines[0]
        == "1. tests/test_models.py:26 (test) complete  [tests/test_models.py::test_resnet18]  (a functools.partial of it)"
    )
    assert any(line.startswith("3. train.py:16 (script) complete  [train.py]") for line in lines)
    assert 'block_cls = { ref = "zoo.resnet:ResNetBlock" }' in result.stdout
    block = run(["examples", "zoo/resnet.py::ResNetBlock", "--json"], cwd=repo)
    items = json.loads(block.stdout)
    assert [(i["example"], i["kind"], i["static"], i["complete"]) for i in items] == [
        ("tests/test_models.py::test_resnet18", "test", False, False),
        ("train.py", "script", False, False),
    ]
    assert items[0]["via"].startswith("through ResNet18 (passed to it at zoo/resnet.py:63)")


def test_examples_of_a_partial_site_say_what_is_missing(repo: Path) -> None:
    result = run(["examples", "zoo/functions.py::unreachable", "--json"], cwd=repo)
    first = json.loads(result.stdout)[0]
    assert first["static"] and not first["complete"]
    assert first["missing"] == [{"where": "inputs.args[0]", "why": "the result of make_batch(...) at line 94"}]
    assert "# needs input: profiles.unreachable.inputs.args[0]" in first["profile"]


def test_auto_traces_the_best_static_call_site(repo: Path) -> None:
    result = run(["trace", "zoo/transformer.py::TransformerLM", "-o", "lm.json"], cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "inputs from tests/test_models.py:35 (test)" in result.stdout.splitlines()
    assert "to learn the inputs" not in result.stdout  # nothing of the workspace ran but the model
    data = expanded(repo / "lm.json")
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    ports = {p["label"]: p for p in data["inputs"]}
    assert ports["args/0"]["role"] == "input"


def test_auto_runs_an_example_then_save_writes_the_learned_profile(repo: Path) -> None:
    result = run(["trace", "zoo/rnn.py::Block", "--save", "-o", "block.json"], cwd=repo)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "running toy.py to learn the inputs"
    assert "inputs from zoo/rnn.py:36 (module)" in lines
    assert f"saved profile Block in {repo / 'jaxlsp.toml'} (new file)" in lines
    data = expanded(repo / "block.json")
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    saved = tomllib.loads((repo / "jaxlsp.toml").read_text())
    assert saved["profiles"]["Block"] == {
        "target": "zoo/rnn.py::Block",
        "kind": "nnx",
        "init": {"kwargs": {"dim": 10}},
        "inputs": {"args": [{"kind": "array", "shape": [3, 10]}]},
    }
    again = run(["trace", "zoo/rnn.py::Block"], cwd=repo)  # now from the profile: nothing runs
    assert again.returncode == 0, again.stderr
    assert "to learn the inputs" not in again.stdout and "inputs from" not in again.stdout


def test_from_an_explicit_test_and_a_profile_that_keeps_from(repo: Path) -> None:
    (repo / "jaxlsp.toml").write_text("# the team's recipes\nversion = 1\n")
    result = run(
        ["trace", "zoo/resnet.py::ResNetBlock", "--from", "tests/test_models.py::test_resnet18", "--save"], cwd=repo
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "running tests/test_models.py::test_resnet18 to learn the inputs"
    assert "inputs from zoo/resnet.py:57 (test)" in result.stdout
    text = (repo / "jaxlsp.toml").read_text()
    assert text.startswith("# the team's recipes\nversion = 1\n\n[profiles.ResNetBlock]\n")  # appended, kept
    saved = tomllib.loads(text)["profiles"]["ResNetBlock"]
    assert saved["mutable"] is True and saved["init"]["kwargs"]["filters"] == 4

    # A call that cannot be written as input specs is saved as from = ..., and re-runs the example.
    (repo / "jaxlsp.toml").write_text(
        'version = 1\n\n[profiles.loss]\ntarget = "zoo/layers.py::classify_loss"\n'
        'from = "tests/test_layers.py::test_classifier_nnx_jit"\n'
    )
    rerun = run(["trace", "zoo/layers.py::classify_loss"], cwd=repo)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.splitlines()[0] == "running tests/test_layers.py::test_classifier_nnx_jit to learn the inputs"


def test_from_an_example_that_never_reaches_the_target(repo: Path) -> None:
    result = run(
        ["trace", "zoo/functions.py::unreachable", "--from", "tests/test_models.py::test_never_reaches"], cwd=repo
    )
    assert result.returncode == 1
    assert "example: running tests/test_models.py::test_never_reaches finished without calling unreachable" in (
        result.stderr
    )


def test_no_call_site_and_no_example_asks_for_input(repo: Path) -> None:
    result = run(["trace", "zoo/functions.py::apply_layers"], cwd=repo)
    assert result.returncode == 3, result.stderr
    assert "needs input" in result.stderr and "Or learn the inputs" not in result.stderr


def test_a_call_inside_a_mesh_context_is_learned_by_running_it(tmp_path: Path) -> None:
    """flax's ``10_fsdp_and_optimizer.py``: ``create_model()`` takes nothing (the definition's
    proposal is complete) but is called only under ``with jax.set_mesh(mesh):`` and names mesh
    axes; auto runs the script to that call instead of tracing it outside any mesh (which failed)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'meshy'\n")
    (tmp_path / "fsdp.py").write_text(
        "import jax\nimport jax.numpy as jnp\nfrom jax.sharding import PartitionSpec as P\n\n"
        "mesh = jax.sharding.Mesh(jax.devices()[:1], ('model',))\n\n\n"
        "@jax.jit\ndef create_model():\n"
        "    return jax.lax.with_sharding_constraint(jnp.zeros((4, 8)), P(None, 'model'))\n\n\n"
        "with jax.set_mesh(mesh):\n    weights = create_model()\nprint('trained', weights.shape)\n"
    )
    listed = run(["examples", "fsdp.py::create_model", "--json"], cwd=tmp_path)
    first = json.loads(listed.stdout)[0]
    assert first["missing"] == [
        {
            "where": "context",
            "why": "it is called inside `with jax.set_mesh(mesh)`: a run of the example traces it in that context",
        }
    ]
    result = run(["trace", "fsdp.py::create_model"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "running fsdp.py to learn the inputs" in result.stdout
    assert "inputs from fsdp.py:14 (module)" in result.stdout


def test_auto_runs_the_next_script_when_the_first_never_calls_the_target(tmp_path: Path) -> None:
    """The best-ranked script ends without calling the target (it needs arguments); auto runs the
    next one, says so, and the inputs are that one's. With none left, the failure says what each
    run did."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'fallback'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(
        "import jax.numpy as jnp\n\n\ndef double(x):\n    return jnp.tanh(x) * 2\n"
    )
    script = (
        "import sys\n\nimport numpy as np\n\nfrom pkg.model import double\n\n\n"
        "def load():\n    return np.ones(({shape}), np.float32)\n\n\n"
        "if __name__ == '__main__':\n    if {guard}:\n        print(double(load()))\n"
    )
    (tmp_path / "a_dry.py").write_text(script.format(shape="2, 3", guard="len(sys.argv) > 3"))
    (tmp_path / "b_run.py").write_text(script.format(shape="4, 5", guard="True"))
    result = run(["trace", "pkg/model.py::double", "-o", "g.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["running a_dry.py to learn the inputs", "running b_run.py to learn the inputs"]
    assert "inputs from b_run.py:14 (script)" in lines
    graph = expanded(tmp_path / "g.json")
    assert [v["shape"] for v in graph["values"] if v["id"] == graph["inputs"][0]["value"]] == [[4, 5]]
    (tmp_path / "b_run.py").write_text(script.format(shape="4, 5", guard="False"))
    failed = run(["trace", "pkg/model.py::double"], cwd=tmp_path)
    assert failed.returncode != 0
    assert "running b_run.py finished without calling double" in failed.stderr
    assert "(before it: example: running a_dry.py finished without calling double" in failed.stderr
    # the next examples share the first one's deadline: with under 5 s of it left, none starts
    (tmp_path / "a_dry.py").write_text(
        script.format(shape="2, 3", guard="__import__('time').sleep(2) or len(sys.argv) > 3")
    )
    late = run(["trace", "pkg/model.py::double", "--timeout", "6"], cwd=tmp_path)
    assert late.returncode != 0
    assert [line for line in late.stdout.splitlines() if line.startswith("running ")] == [
        "running a_dry.py to learn the inputs"
    ]
    assert "running a_dry.py finished without calling double" in late.stderr and "before it" not in late.stderr


def test_a_notebook_is_run_cell_by_cell_to_learn_the_inputs(tmp_path: Path) -> None:
    """Equinox's example notebooks call their models in later cells on data a helper makes; auto
    runs the notebook as "Run all" would (from its folder, IPython lines neutralised, ``display``
    and a ``get_ipython()`` that is not Colab there) up to the call. Before, the run imported ``nb`` as a module and failed."""

    def cell(kind: str, source: str) -> dict[str, object]:
        extra = {"outputs": [], "execution_count": None} if kind == "code" else {}
        return {"cell_type": kind, "metadata": {}, "source": source, **extra}

    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "language": "python"}},
        "cells": [
            cell("markdown", "# A model"),
            cell(
                "code",
                "%matplotlib inline\nimport equinox as eqx\nimport jax\nimport numpy as np\n"
                "if 'google.colab' in str(get_ipython()):\n    raise SystemExit('colab only')\n"
                "get_ipython().run_line_magic('load_ext', 'autoreload')",
            ),
            cell(
                "code",
                "class MLP(eqx.Module):\n    layer: eqx.nn.Linear\n\n    def __init__(self, key):\n"
                "        self.layer = eqx.nn.Linear(3, 2, key=key)\n\n"
                "    def __call__(self, x):\n        return jax.nn.relu(self.layer(x))",
            ),
            cell("code", "def get_data():\n    return np.ones((3,), np.float32)"),
            cell("code", "model = MLP(jax.random.key(0))\n\ndisplay(model(get_data()))\nprint('after')"),
        ],
    }
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook))
    listed = run(["examples", "nb.ipynb::MLP"], cwd=tmp_path)
    assert listed.stdout.splitlines()[0].startswith("1. nb.ipynb:cell 4:3 (module) partial  [nb.ipynb]"), listed.stdout
    result = run(["trace", "nb.ipynb::MLP", "-o", "g.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "running nb.ipynb to learn the inputs"
    assert "inputs from nb.ipynb:cell 4:3 (module)" in lines
    graph = expanded(tmp_path / "g.json")
    ports = {p["label"]: p["value"] for p in graph["inputs"]}
    shapes = {v["id"]: v["shape"] for v in graph["values"]}
    assert shapes[ports["args/0"]] == [3]
    assert graph["profile"]["callsite"] == {"path": "nb.ipynb", "line": 3, "cell": 4, "function": "<module>"}


def test_a_script_runs_with_the_arguments_its_readme_gives(tmp_path: Path) -> None:
    """Flax's examples need ``--workdir`` and ``--config`` to run at all, and their READMEs say
    so (``python main.py --workdir=/tmp/mnist --config=configs/default.py``): auto runs the
    script as its README does."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'documented'\n")
    (tmp_path / "model.py").write_text("import jax.numpy as jnp\n\n\ndef double(x):\n    return jnp.tanh(x) * 2\n")
    (tmp_path / "train.py").write_text(
        "import argparse\n\nimport numpy as np\n\nfrom model import double\n\n\n"
        "def batches(size):\n    return np.ones((size, 2), np.float32)\n\n\n"
        "if __name__ == '__main__':\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--size', type=int, required=True)\n"
        "    print(double(batches(parser.parse_args().size)))\n"
    )
    (tmp_path / "README.md").write_text(
        "# Training\n\n```sh\npip install -r requirements.txt\n"
        "python train.py --size $SIZE  # not this one: a shell variable\n"
        "python train.py \\\n    --size 5 | tee log.txt\n```\n"
    )
    listed = run(["examples", "model.py::double"], cwd=tmp_path)
    assert "[train.py --size 5]" in listed.stdout.splitlines()[0], listed.stdout
    result = run(["trace", "model.py::double", "-o", "g.json", "--save"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "running train.py --size 5 to learn the inputs"
    graph = expanded(tmp_path / "g.json")
    assert [v["shape"] for v in graph["values"] if v["id"] == graph["inputs"][0]["value"]] == [[5, 2]]
    saved = tomllib.loads((tmp_path / "jaxlsp.toml").read_text())  # what the run learned, as a recipe
    assert [p["inputs"]["args"] for p in saved["profiles"].values()] == [[{"kind": "array", "shape": [5, 2]}]]


def test_a_plotting_import_the_run_never_reaches_is_no_error_and_one_it_reaches_says_where(tmp_path: Path) -> None:
    """Issue 46.6: a model whose example plots with a package this machine lacks. A lazy import
    after the target's first call is never reached (the run stops at the call); an import the run
    does reach is refused with the example's file and line, not a bare "No module named"."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'plots'\n")
    (tmp_path / "model.py").write_text("import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.tanh(x)\n")
    (tmp_path / "lazy.py").write_text(
        "import jax.numpy as jnp\n\nfrom model import f\n\n\n"
        "def show(y):\n    import not_an_installed_plotting_package as px\n\n    px.line(y).show()\n\n\n"
        'if __name__ == "__main__":\n    show(f(jnp.ones(3)))\n'
    )
    (tmp_path / "eager.py").write_text(
        "import jax.numpy as jnp\nimport not_an_installed_plotting_package as px\n\nfrom model import f\n\n"
        "px.line(f(jnp.ones(3))).show()\n"
    )
    lazy = run(["trace", "model.py::f", "--from", "lazy.py"], cwd=tmp_path)
    assert lazy.returncode == 0, lazy.stderr
    assert "inputs from lazy.py:13 (script)" in lazy.stdout.splitlines()
    eager = run(["trace", "model.py::f", "--from", "eager.py"], cwd=tmp_path)
    assert eager.returncode != 0
    assert "example at eager.py:2:1" in eager.stderr
    assert "No module named 'not_an_installed_plotting_package'" in eager.stderr
