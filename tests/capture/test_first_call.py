"""Captures at a call site: the real worker runs one of a repository's own examples (a pytest test
with its conftest.py and configuration, a script with arguments, a module-level run) up to the
target's first call, traces that call and stops. Runs on a copy of tests/workspaces/
callsites_repo, since its examples print and write files in their current folder."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.capture.launch.client import capture_sync
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.recipes.examples import parse_example
from tests.deadlines import scaled

REPO = Path(__file__).resolve().parents[1] / "workspaces" / "callsites_repo"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo") / "callsites_repo"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def request(root: Path, target: str, example: str, kind: str | None = None) -> dict[str, Any]:
    rel, _, name = target.partition("::")
    profile = {"name": None, "device": "cpu", "seed": 0, "x64": False, "inputs": {}, "load": "module"}
    profile["example"] = parse_example(example, root)
    return {"target": {"path": str(root / rel), "name": name}, "profile": profile, "workspaceRoot": str(root)}


def run(root: Path, target: str, example: str, timeout: float | None = None) -> dict[str, Any]:
    options = CaptureOptions(timeout=scaled(90) if timeout is None else timeout)  # scaled as the capture starts
    outcome = capture_sync(request(root, target, example), sys.executable, options)
    result = dict(outcome.result)
    result["logs"] = outcome.logs
    return result


def inputs(result: dict[str, Any]) -> list[tuple[str, list[int], str]]:
    graph = result["graph"]
    values = {v["id"]: v for v in graph["values"]}
    out = []
    for port in graph["inputs"]:
        value = values[port["value"]]
        if port["role"] == "input":
            out.append((port["label"], value["shape"], value["dtype"]))
    return out


def test_a_pytest_test_through_its_conftest_fixture_and_config(repo: Path) -> None:
    result = run(repo, "zoo/functions.py::never_called_statically", "tests/test_models.py::test_from_fixture")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [2, 3], "float32")]  # zoo_batch, a conftest.py fixture
    assert result["callsite"]["path"] == str(repo / "tests" / "test_models.py")
    assert result["callsite"]["line"] == 75
    assert result["learned"] == {
        "from": "tests/test_models.py::test_from_fixture",
        "table": {"kind": "function", "inputs": {"args": [{"kind": "array", "shape": [2, 3]}]}},
    }
    assert result["graph"]["profile"]["example"]["text"] == "tests/test_models.py::test_from_fixture"


def test_an_absl_parameterized_test_is_found_by_its_source_name(repo: Path) -> None:
    result = run(repo, "zoo/functions.py::softsign", "tests/test_absl_style.py::SoftsignTest::test_softsign")
    assert result["ok"], result.get("error")  # pytest knows test_softsign0 and test_softsign1 only
    assert inputs(result) == [("args/0", [2, 4], "float32")]


def test_parameterized_tests_run_together_with_a_whole_file(repo: Path) -> None:
    # auto runs the best sites' tests in one pytest run: absl's test_softsign (pytest knows only
    # test_softsign0/1) beside a whole file; its node id alone selects nothing (flax ogbg_molpcba)
    req = request(repo, "zoo/functions.py::softsign", "tests/test_absl_style.py::SoftsignTest::test_softsign")
    example = req["profile"]["example"]
    example["tests"] = [*example["tests"], str(repo / "tests" / "test_layers.py")]
    outcome = capture_sync(req, sys.executable, CaptureOptions(timeout=scaled(90)))
    assert outcome.result["ok"], outcome.result.get("error")
    assert inputs(dict(outcome.result)) == [("args/0", [2, 4], "float32")]


def test_a_target_file_that_another_import_hook_loads(tmp_path: Path) -> None:
    # equinox's tests load equinox through jaxtyping's import hook (--jaxtyping-packages), put
    # first in sys.meta_path after the run started: the target's file is still instrumented
    root = tmp_path / "callsites_repo"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "conftest.py").write_text("import jaxtyping\n\njaxtyping.install_import_hook(['zoo'], None)\n")
    result = run(root, "zoo/functions.py::softsign", "tests/test_absl_style.py::SoftsignTest::test_softsign")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [2, 4], "float32")]


def test_a_call_under_vmap_with_an_axis_name_is_traced_with_that_axis_bound(tmp_path: Path) -> None:
    # equinox's BatchNorm is called under jax.vmap(..., axis_name="batch") and takes a pmean over
    # "batch": traced on its own the call had no such axis ("unbound axis name")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "norm.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n\n"
        "def centred(x):\n    return x - jax.lax.pmean(jnp.mean(x), axis_name='batch')\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_norm.py").write_text(
        "import jax\nimport jax.numpy as jnp\nfrom pkg.norm import centred\n\n\n"
        "def test_centred():\n    jax.vmap(centred, axis_name='batch')(jnp.ones((5, 3)))\n"
    )
    result = run(tmp_path, "pkg/norm.py::centred", "tests/test_norm.py::test_centred")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [3], "float32")]
    assert any(node["primitive"] == "psum" for node in result["graph"]["nodes"]), "the pmean over 'batch' is traced"


def test_a_call_under_set_mesh_is_traced_inside_that_mesh(tmp_path: Path) -> None:
    # flax's nnx fsdp example calls ``create_model()`` under ``with jax.set_mesh(mesh):``, and its
    # parameters name mesh axes: traced on its own (another thread) the call had no mesh
    (tmp_path / "shard.py").write_text(
        "import jax\nimport jax.numpy as jnp\nfrom jax.sharding import PartitionSpec as P\n\n\n"
        "@jax.jit\ndef spread(x):\n    return jax.lax.with_sharding_constraint(jnp.tanh(x), P('data'))\n\n\n"
        "if __name__ == '__main__':\n    mesh = jax.sharding.Mesh(jax.devices()[:1], ('data',))\n"
        "    with jax.set_mesh(mesh):\n        spread(jnp.ones((4, 2)))\n"
    )
    result = run(tmp_path, "shard.py::spread", "shard.py")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [4, 2], "float32")]
    assert any(node["primitive"] == "sharding_constraint" for node in result["graph"]["nodes"])


def test_a_call_under_an_explicit_mesh_set_in_setupclass_keeps_the_callers_shardings(tmp_path: Path) -> None:
    # bonsai's sharding tests: ``jax.set_mesh`` of an 8-device mesh with AxisType.Explicit in
    # setUpClass, the model called on sharded arrays. The shardings are part of the arrays'
    # types there: their abstract copies lost them ("select `which` must be scalar or have the
    # same sharding as cases"), and jnp.where resharded what the caller's program never does
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "block.py").write_text(
        "import jax\nimport jax.numpy as jnp\nfrom flax import nnx\nfrom jax.sharding import PartitionSpec as P\n\n\n"
        "class Block(nnx.Module):\n    def __init__(self, d, *, rngs):\n"
        "        self.w = nnx.Param(jax.random.normal(rngs.params(), (d, d)))\n\n"
        "    def __call__(self, x, mask):\n"
        "        keep = jnp.ones(x.shape, bool, out_sharding=P('fsdp', None))\n"
        "        y = jax.lax.select(keep, x @ self.w[...], jnp.zeros_like(x))\n"
        "        return jnp.where(mask, y, 0.0)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_block.py").write_text(
        "import unittest\n\nimport jax\nimport jax.numpy as jnp\nfrom flax import nnx\n"
        "from jax.sharding import AxisType, PartitionSpec as P\n\nfrom pkg.block import Block\n\n\n"
        "class BlockTest(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
        "        axes = (AxisType.Explicit, AxisType.Explicit)\n"
        "        jax.set_mesh(jax.make_mesh((4, 2), ('fsdp', 'tp'), axis_types=axes))\n\n"
        "    def test_block(self):\n        model = Block(8, rngs=nnx.Rngs(0))\n"
        "        x = jax.device_put(jnp.ones((4, 8)), P('fsdp', None))\n"
        "        mask = jax.device_put(jnp.ones((4, 8), bool), P('fsdp', None))\n"
        "        self.assertEqual(model(x, mask).shape, (4, 8))\n"
    )
    req = request(tmp_path, "pkg/block.py::Block", "tests/test_block.py::BlockTest::test_block")
    req["profile"]["devices"] = 8
    outcome = capture_sync(req, sys.executable, CaptureOptions(timeout=scaled(90)))
    result = dict(outcome.result)
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [4, 8], "float32"), ("args/1", [4, 8], "bool")]
    primitives = {node["primitive"] for node in result["graph"]["nodes"]}
    assert "select_n" in primitives and "reshard" not in primitives, primitives


_JITTED_CALLS = {
    "linen": (
        "import flax.linen as nn\n\n\nclass Inner(nn.Module):\n    @nn.jit\n    @nn.compact\n"
        "    def __call__(self, x):\n        return nn.Dense(4)(x)\n\n\nclass Outer(nn.Module):\n"
        "    @nn.compact\n    def __call__(self, x):\n        return Inner()(x)\n",
        "import jax\nimport jax.numpy as jnp\nfrom pkg.models import Outer\n\n\ndef test_it():\n"
        "    y, _ = Outer().init_with_output(jax.random.key(0), jnp.ones((2, 3)))\n    assert y.shape == (2, 4)\n",
    ),
    "nnx": (
        "from flax import nnx\n\n\nclass Inner(nnx.Module):\n    def __init__(self, rngs):\n"
        "        self.lin = nnx.Linear(3, 4, rngs=rngs)\n\n    @nnx.jit\n    def __call__(self, x):\n"
        "        return self.lin(x)\n",
        "import jax.numpy as jnp\nfrom flax import nnx\nfrom pkg.models import Inner\n\n\ndef test_it():\n"
        "    assert Inner(nnx.Rngs(0))(jnp.ones((2, 3))).shape == (2, 4)\n",
    ),
    "equinox": (
        "import equinox as eqx\nimport jax\n\n\nclass Inner(eqx.Module):\n    w: jax.Array\n\n"
        "    def __init__(self, key):\n        self.w = jax.random.normal(key, (3, 4))\n\n"
        "    @eqx.filter_jit\n    def __call__(self, x):\n        return x @ self.w\n",
        "import jax\nimport jax.numpy as jnp\nfrom pkg.models import Inner\n\n\ndef test_it():\n"
        "    assert Inner(jax.random.key(0))(jnp.ones((2, 3))).shape == (2, 4)\n",
    ),
}


@pytest.mark.parametrize("library", list(_JITTED_CALLS))
def test_a_module_whose_call_is_jitted(tmp_path: Path, library: str) -> None:
    # the example's thread is paused inside the trace of Inner's own jit (@nn.jit over
    # @nn.compact, @nnx.jit, @eqx.filter_jit): tracing the same jit on the same shapes in the
    # trace thread waited on JAX's cache entry for that trace, until the deadline
    model, test = _JITTED_CALLS[library]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(model)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_models.py").write_text(test)
    result = run(tmp_path, "pkg/models.py::Inner", "tests/test_models.py::test_it", timeout=scaled(45))
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [2, 3], "float32")]
    assert any(group["kind"] == "jit" for group in result["graph"]["groups"]), "the target's own jit is traced"


@pytest.mark.parametrize("library", ["equinox", "linen"])
def test_a_subclass_that_inherits_its_call(tmp_path: Path, library: str) -> None:
    # equinox's Conv2d(Conv) and MaxPool2d(Pool) define only __init__: the call they run is their
    # base's; the hook used to wait in the subclass's own __call__, which does not exist
    layers = {
        "equinox": (
            "import equinox as eqx\nimport jax.numpy as jnp\n\n\n"
            "class Scale(eqx.Module):\n    factor: float\n\n"
            "    def __call__(self, x):\n        return jnp.tanh(x) * self.factor\n\n\n"
            "class Double(Scale):\n    def __init__(self):\n        self.factor = 2.0\n\n\n"
            "class Plain(eqx.Module):\n    factor: float = 1.0\n"
        ),
        "linen": (
            "import flax.linen as nn\nimport jax.numpy as jnp\n\n\n"
            "class Scale(nn.Module):\n    factor: float = 1.0\n\n"
            "    def __call__(self, x):\n        return jnp.tanh(x) * self.factor\n\n\n"
            "class Double(Scale):\n    factor: float = 2.0\n\n\n"
            "class Plain(nn.Module):\n    factor: float = 1.0\n"
        ),
    }[library]
    call = "Double()(load())" if library == "equinox" else "Double().apply({}, load())"
    (tmp_path / "layers.py").write_text(layers)
    (tmp_path / "test_layers.py").write_text(
        "import numpy as np\n\nfrom layers import Double, Plain\n\n\n"
        "def load():\n    return np.ones((2, 3), np.float32)\n\n\n"
        f"def test_double():\n    assert not callable(Plain())\n    assert {call}.shape == (2, 3)\n"
    )
    result = run(tmp_path, "layers.py::Double", "test_layers.py::test_double")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [2, 3], "float32")]
    assert {n["primitive"] for n in result["graph"]["nodes"]} >= {"tanh", "mul"}
    plain = run(tmp_path, "layers.py::Plain", "test_layers.py::test_double")  # still uncallable
    assert not plain["ok"]
    # answered as the class is made, before any test runs (issue 46.6)
    assert plain["error"] == {
        "kind": "refused",
        "message": "Plain has no __call__ of its own or from a base: nothing calls it",
    }


def test_a_script_that_imports_its_own_package_runs_as_python_m(tmp_path: Path) -> None:
    # JAX's examples/mnist_classifier.py does ``from examples import datasets``: run as a plain
    # script it cannot import its own package (its users run ``python -m examples.mnist_classifier``)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "__init__.py").write_text("")
    (tmp_path / "examples" / "datasets.py").write_text(
        "import numpy as np\n\n\ndef mnist():\n    return np.ones((4, 784), np.float32)\n"
    )
    (tmp_path / "examples" / "classifier.py").write_text(
        "import jax.numpy as jnp\n\nfrom examples import datasets\nfrom . import datasets as same\n\n\n"
        "def loss(images):\n    return jnp.mean(jnp.tanh(images))\n\n\n"
        "if __name__ == '__main__':\n    assert same is datasets\n    print(loss(datasets.mnist()))\n"
    )
    result = run(tmp_path, "examples/classifier.py::loss", "examples/classifier.py")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [4, 784], "float32")]


def test_a_linen_block_reached_inside_its_owner_init(repo: Path) -> None:
    result = run(repo, "zoo/resnet.py::ResNetBlock", "tests/test_models.py::test_resnet18")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [2, 8, 8, 4], "float32")]  # the first block's input
    assert result["callsite"]["path"] == str(repo / "zoo" / "resnet.py")  # ResNet.__call__ calls it
    table = result["learned"]["table"]
    assert table["kind"] == "linen" and table["mutable"] is True  # called inside init
    assert table["init"]["kwargs"]["filters"] == 4
    assert table["init"]["kwargs"]["act"] == {"ref": "jax.nn:relu"}
    assert table["init"]["kwargs"]["conv"]["args"] == [{"ref": "flax.linen:Conv"}]
    primitives = {n["primitive"] for n in result["graph"]["nodes"]}
    assert "conv_general_dilated" in primitives


def test_a_layer_built_inside_a_class_local_to_the_test(repo: Path) -> None:
    result = run(repo, "zoo/tied.py::Tied", "tests/test_tied.py::test_a_layer_inside_a_local_model")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [3, 4], "float32")]
    assert result["callsite"]["path"] == str(repo / "tests" / "test_tied.py")
    assert {n["primitive"] for n in result["graph"]["nodes"]} >= {"dot_general", "tanh"}


def test_a_script_with_arguments(repo: Path) -> None:
    result = run(repo, "zoo/functions.py::normalize", "train.py --batch-size 3 --steps 1")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [3, 7], "float32")]
    assert result["learned"]["table"]["inputs"] == {"args": [{"kind": "array", "shape": [3, 7]}]}  # eps left out


def test_a_script_that_defines_the_target(repo: Path) -> None:
    result = run(repo, "scripts/solo.py::step", "scripts/solo.py 5")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [5, 2], "float32")]
    assert result["learned"]["table"]["inputs"] == {"args": [{"kind": "array", "shape": [5, 2]}]}


def test_a_jitted_target_keeps_its_static_arguments(repo: Path) -> None:
    # flax/examples/seq2seq: decode is jax.jit(static_argnums=3) with a CharacterTable there
    result = run(repo, "scripts/solo.py::widen", "scripts/solo.py 5")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [5, 2], "float32")]


def test_a_module_level_run(repo: Path) -> None:
    result = run(repo, "zoo/eqx_models.py::Head", "zoo/demo_heads.py")
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [8], "float32")]
    assert result["learned"]["table"] == {
        "kind": "equinox",
        "init": {"kwargs": {"in_size": 8, "out_size": 2}},
        "inputs": {"args": [{"kind": "array", "shape": [8]}]},
    }


def test_an_example_that_never_reaches_the_target(repo: Path) -> None:
    result = run(repo, "zoo/functions.py::unreachable", "tests/test_models.py::test_never_reaches")
    assert not result["ok"]
    assert result["error"]["kind"] == "example"
    assert result["error"]["message"].startswith(
        "running tests/test_models.py::test_never_reaches finished without calling unreachable (pytest: 1 test(s): 1 passed)"
    )


def test_an_example_that_fails_before_the_call(repo: Path) -> None:
    result = run(repo, "zoo/functions.py::unreachable", "tests/test_models.py::test_fails_before")
    error = result["error"]
    assert error["kind"] == "example"
    assert "running tests/test_models.py::test_fails_before failed before it called unreachable" in error["message"]
    assert "the batch is not what this test expects" in error["message"]
    assert (error["frame"]["path"], error["frame"]["line"]) == (str(repo / "tests" / "test_models.py"), 101)


def test_an_example_that_hangs_is_stopped_at_the_deadline(repo: Path) -> None:
    # limit under test: this capture's time limit must run out (not a wait)
    result = run(repo, "zoo/functions.py::slow_to_reach", "tests/test_models.py::test_hangs_before", timeout=12)
    assert result["error"]["kind"] == "timeout"


def test_an_example_that_prints_and_writes_runs_in_the_root(repo: Path) -> None:
    written = repo / "written_by_test.txt"
    written.unlink(missing_ok=True)
    result = run(repo, "zoo/functions.py::never_called_statically", "tests/test_models.py::test_prints_and_writes")
    assert result["ok"], result.get("error")
    assert written.read_text() == str(repo)  # its current folder was the workspace root
    assert "hello from the test" in result["logs"]  # its prints are the worker's output, not the result
    assert inputs(result) == [("args/0", [3, 5], "float32")]


def test_through_the_warm_spare(repo: Path) -> None:
    async def go() -> dict[str, Any]:
        pool = SparePool()
        try:
            assert await pool.start(sys.executable)
            outcome = await pool.capture(
                request(repo, "zoo/rnn.py::Block", "toy.py"), sys.executable, CaptureOptions(90)
            )
            assert outcome.via == "spare"
            return dict(outcome.result)
        finally:
            await pool.close()

    result = asyncio.run(go())
    assert result["ok"], result.get("error")
    assert inputs(result) == [("args/0", [3, 10], "float32")]
    assert result["learned"]["table"] == {
        "kind": "nnx",
        "init": {"kwargs": {"dim": 10}},
        "inputs": {"args": [{"kind": "array", "shape": [3, 10]}]},
    }


def test_a_values_run_of_inputs_learned_from_an_example_is_refused_with_what_to_do(repo: Path) -> None:
    """The example's arrays are not kept, so a values run needs the learned profile saved first:
    refused before anything runs, never a shapes-only graph that claims values."""
    req = request(repo, "zoo/functions.py::never_called_statically", "tests/test_models.py::test_from_fixture")
    req["values"] = {}
    outcome = capture_sync(req, sys.executable, CaptureOptions(timeout=scaled(90)))
    error = outcome.result.get("error") or {}
    assert not outcome.result["ok"] and error.get("kind") == "refused", outcome.result
    assert (
        "save the learned profile" in error["message"] and "tests/test_models.py::test_from_fixture" in error["message"]
    )
