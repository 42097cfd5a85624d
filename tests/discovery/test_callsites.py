"""Static call sites read from a workspace laid out like a real repository (tests/workspaces/
callsites_repo: a package, its tests, a training script, toy runs), one form per test, with the
ranking, the inheritance of examples and the provenance; nothing is imported or run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.discovery import Classifier, WorkspaceIndex
from jaxlsp.discovery.callsites.finder import CallSiteFinder
from jaxlsp.discovery.callsites.sites import CallSite
from jaxlsp.discovery.roots import project_root
from tests.deadlines import scaled

REPO = Path(__file__).resolve().parents[1] / "workspaces" / "callsites_repo"


@pytest.fixture(scope="module")
def finder() -> CallSiteFinder:
    index = WorkspaceIndex([REPO])
    return CallSiteFinder(index, REPO, Classifier(index))


def sites(finder: CallSiteFinder, target: str) -> list[CallSite]:
    rel, _, name = target.partition("::")
    found = finder.classifier.discover((REPO / rel).resolve())
    entry = next(e for e in (*found.entrypoints, *found.drivers) if e.name == name)
    return finder.find(entry)


def best(finder: CallSiteFinder, target: str) -> CallSite:
    found = sites(finder, target)
    assert found, f"no call site of {target}"
    return found[0]


def ones(*shape: int, **extra: Any) -> dict[str, Any]:
    return {"kind": "array", "shape": list(shape), "generator": {"kind": "ones"}, **extra}


def test_partial_alias_with_refs_and_flags_from_a_test(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/resnet.py::ResNet")
    assert site.complete and site.static
    assert (site.kind, site.example) == ("test", "tests/test_models.py::test_resnet18")
    assert site.where(REPO) == "tests/test_models.py:26"  # model.apply(...), ranked before model.init
    assert site.init == {
        "kwargs": {
            "stage_sizes": [2, 2, 2, 2],  # from ResNet18 = partial(ResNet, ...) in zoo/resnet.py
            "block_cls": {"ref": "zoo.resnet:ResNetBlock"},
            "num_classes": 10,
            "num_filters": 4,
        }
    }
    assert site.inputs == {"args": [ones(2, 32, 32, 3)], "kwargs": {"train": False}}
    assert site.via == "a functools.partial of it"


def test_init_call_makes_every_collection_mutable(finder: CallSiteFinder) -> None:
    init = [s for s in sites(finder, "zoo/resnet.py::ResNet") if s.where(REPO) == "tests/test_models.py:25"]
    assert len(init) == 1 and init[0].extra == {"mutable": True}


def test_script_site_ranks_after_the_test(finder: CallSiteFinder) -> None:
    found = sites(finder, "zoo/resnet.py::ResNet")
    kinds = [s.kind for s in found if s.complete]
    assert kinds[:2] == ["test", "test"] and "script" in kinds
    script = next(s for s in found if s.kind == "script")
    assert script.example == "train.py"  # a __main__ guard: run as a script
    assert script.init is not None and script.init["kwargs"]["stage_sizes"] == [1, 1]  # ResNetTiny


def test_config_dataclass_with_defaults_filled(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/transformer.py::TransformerLM")
    assert site.complete
    config = site.init["args"][0] if site.init else None
    assert config == {
        "ref": "zoo.transformer:TransformerConfig",
        "kwargs": {
            "vocab_size": 32,
            "deterministic": True,
            "emb_dim": 16,
            "num_heads": 2,
            "num_layers": 2,
            "mlp_dim": 32,
            "max_len": 64,
            "dropout_rate": 0.1,
        },
    }
    assert site.inputs == {
        "args": [{"kind": "array", "shape": [2, 8], "dtype": "int32", "generator": {"kind": "zeros"}}]
    }


def test_nnx_construction_drops_rngs_and_a_mode_switch_makes_it_a_run(finder: CallSiteFinder) -> None:
    found = sites(finder, "zoo/rnn.py::GRUCell")
    assert not any(s.extra.get("method") for s in found)  # cell.eval() is Flax's method, no call site
    site = found[0]
    assert site.init == {"args": [4, 8]}  # rngs=nnx.Rngs(0) left to the worker
    zeros = {"kind": "array", "shape": [2, 8], "generator": {"kind": "zeros"}}
    assert site.inputs == {"args": [zeros, ones(2, 4)]}
    # cell.eval() changed the instance before the call: a fresh construction is not what runs
    assert not site.complete and [m.where for m in site.missing] == ["init"]
    assert "cell.eval() at line" in site.missing[0].why
    assert any(s.example == "tests/test_models.py::test_gru" and not s.static for s in found)


def test_equinox_positional_key_dropped_and_vmap_removes_the_leading_axis(finder: CallSiteFinder) -> None:
    cnn = best(finder, "zoo/eqx_models.py::CNN")
    assert cnn.complete and cnn.init == {} and cnn.inputs == {"args": [ones(1, 28, 28)]}
    head = best(finder, "zoo/eqx_models.py::Head")
    assert head.init == {"args": [16, 4]} and head.inputs == {"args": [ones(16)]}


def test_module_level_toy_run(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/rnn.py::ScanMLP")
    assert site.complete and (site.kind, site.example, site.line) == ("module", "toy.py", 9)
    assert site.init == {"args": [10], "kwargs": {"n_layers": 3}}
    assert site.inputs == {"args": [ones(3, 10)]}


def test_random_arrays_literal_names_and_module_constants(finder: CallSiteFinder) -> None:
    attention = best(finder, "zoo/functions.py::attention")
    normal = {"kind": "array", "shape": [4, 8], "generator": {"kind": "normal"}}
    assert attention.inputs == {"args": [normal, normal, normal], "kwargs": {"causal": True}}
    normalize = best(finder, "zoo/functions.py::normalize")  # jax.jit(normalize)(jnp.ones(SHAPE))
    assert normalize.inputs == {"args": [ones(4, 6)]} and normalize.example == "tests/test_models.py::test_normalize"
    mse = best(finder, "zoo/functions.py::mse")  # a dict of arrays
    zeros = {"generator": {"kind": "zeros"}, "kind": "array"}
    assert mse.inputs == {
        "args": [{"w": {**zeros, "shape": [3, 1]}, "b": {**zeros, "shape": [1]}}, ones(5, 3), ones(5, 1)]
    }


def test_full_astype_and_partial_keyword(finder: CallSiteFinder) -> None:
    found = sites(finder, "zoo/layers.py::project")
    by_test = {s.example: s for s in found}
    names = by_test["tests/test_layers.py::test_project_literal_names"]
    assert names.inputs == {
        "args": [
            {"kind": "array", "shape": [2, 3], "generator": {"kind": "full", "value": 0.5}},
            {"kind": "array", "shape": [3, 4], "generator": {"kind": "zeros"}},  # bfloat16 .astype(float32)
        ]
    }
    bound = by_test["tests/test_layers.py::test_project_partial"]
    assert bound.inputs == {"args": [ones(1, 3)], "kwargs": {"w": ones(3, 3)}}
    assert found[0] is bound  # fewer elements first


def test_uniform_arange_reshape_and_split_keys(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::lookup")
    assert site.inputs == {
        "args": [
            {"kind": "array", "shape": [10, 4], "generator": {"kind": "uniform", "low": -1.0, "high": 1.0}},
            {
                "kind": "array",
                "shape": [2, 3],
                "dtype": "int32",
                "generator": {"kind": "arange", "start": 0, "step": 1},
            },
        ]
    }


def test_shape_dtype_struct_through_eval_shape_and_a_module_attribute(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::half_precision")  # jax.eval_shape(layers.half_precision, spec)
    assert site.complete and site.inputs == {"args": [{"kind": "array", "shape": [2, 5], "dtype": "float16"}]}


def test_numpy_arrays_are_what_jax_sees(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::with_numpy")
    assert site.inputs == {
        "args": [
            {"kind": "array", "shape": [2, 3], "generator": {"kind": "zeros"}},
            {"kind": "array", "shape": [2, 3], "generator": {"kind": "normal"}},
        ]
    }
    assert "x64" not in site.extra


def test_apply_rngs_mutable_and_flags(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::Dropper")
    assert site.init == {"kwargs": {"rate": 0.1}}
    assert site.inputs == {"args": [ones(3, 5)], "kwargs": {"train": True}}
    assert site.extra == {"rngs": ["dropout"], "mutable": ["batch_stats"]}


def test_apply_with_method(finder: CallSiteFinder) -> None:
    found = sites(finder, "zoo/layers.py::VAE")
    encode = next(s for s in found if s.extra.get("method") == "encode")
    assert encode.complete and encode.inputs == {"args": [ones(4, 6)]}


def test_nnx_method_call_and_positional_rngs(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::Codec")  # Codec(5, nnx.Rngs(1)).encode(x)
    assert site.init == {"args": [5]} and site.extra == {"method": "encode"}
    assert site.inputs == {"args": [ones(7, 5)]}


def test_filter_jit_wrapper(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::Mixer")
    assert site.complete and site.init == {"args": [4]} and site.inputs == {"args": [ones(4)]}


def test_library_refs_and_a_layer_list(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::Stack")
    assert site.init == {
        "kwargs": {
            "layers": [{"ref": "zoo.layers:Scale", "args": [2.0]}, {"ref": "zoo.layers:Scale", "args": [0.5]}],
            "activation": {"ref": "flax.linen:tanh"},
        }
    }
    assert site.inputs == {"args": [ones(2, 2)], "kwargs": {"deterministic": True}}


def test_a_model_as_an_argument_through_nnx_jit(finder: CallSiteFinder) -> None:
    site = best(finder, "zoo/layers.py::classify_loss")
    model = {"ref": "zoo.layers:Classifier", "args": [8, 3], "kwargs": {"rngs": {"ref": "flax.nnx:Rngs", "args": [0]}}}
    zeros = {"kind": "array", "shape": [4, 3], "generator": {"kind": "zeros"}}
    assert site.complete and site.inputs == {"args": [model, ones(4, 8), zeros]}


def test_a_workspace_function_result_is_never_called_statically(finder: CallSiteFinder) -> None:
    found = sites(finder, "zoo/functions.py::never_called_statically")
    assert not any(s.complete for s in found)
    partial = next(s for s in found if s.example == "tests/test_models.py::test_prints_and_writes" and s.static)
    assert [m.where for m in partial.missing] == ["inputs.args[0]"]
    assert "make_batch" in partial.missing[0].why
    fixture = next(s for s in found if s.example == "tests/test_models.py::test_from_fixture" and s.static)
    assert "zoo_batch is a parameter of test_from_fixture" in fixture.missing[0].why
    assert any(not s.static for s in found)  # both tests remain runnable examples


def test_passed_as_a_value_inherits_the_users_examples(finder: CallSiteFinder) -> None:
    block = sites(finder, "zoo/resnet.py::ResNetBlock")
    assert [s.example for s in block] == ["tests/test_models.py::test_resnet18", "train.py"]
    assert all(not s.static and s.via and "through ResNet" in s.via for s in block)


def test_used_inside_another_target_inherits_its_examples(finder: CallSiteFinder) -> None:
    mlp = sites(finder, "zoo/transformer.py::MlpBlock")  # MlpBlock <- DecoderLayer <- TransformerLM
    assert mlp and mlp[0].example == "tests/test_models.py::test_transformer" and not mlp[0].static
    block = sites(finder, "zoo/rnn.py::Block")
    assert [s.example for s in block] == ["toy.py"]


def test_a_class_local_to_a_test_function_makes_the_test_an_example(finder: CallSiteFinder) -> None:
    """Calls inside a class defined in a test function are not read statically; the test that
    defines it is still an example to run (equinox's tests build ``Shared`` that way)."""
    found = sites(finder, "zoo/tied.py::Tied")
    assert [(s.example, s.static, s.via) for s in found] == [
        ("tests/test_tied.py::test_a_layer_inside_a_local_model", False, "uses it here")
    ]


def test_list_members_are_reached_through_their_owner(finder: CallSiteFinder) -> None:
    scale = sites(finder, "zoo/layers.py::Scale")
    assert any(s.example == "tests/test_layers.py::test_stack_of_scales" and not s.static for s in scale)


def test_tests_importing_the_module_are_the_last_resort(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "ops.py").write_text("import jax.numpy as jnp\n\ndef hidden(x):\n    return jnp.sin(x)\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ops.py").write_text(
        "from pkg import ops\n\ndef test_all():\n    for name in dir(ops):\n        getattr(ops, name)\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "pkg" / "ops.py")
    entry = found.entrypoints[0]
    result = CallSiteFinder(index, tmp_path).find(entry)
    assert [(s.example, s.static, s.via) for s in result] == [("tests/test_ops.py", False, "imports pkg.ops")]


def test_helpers_and_base_classes_inherit_the_examples_of_their_users(tmp_path: Path) -> None:
    """Equinox's layout: ``_scale`` is called only inside ``Conv``, and ``Conv`` is built only
    through its subclass's ``super().__init__``; the tests reach both through ``Conv2d``."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .layers import Conv2d as Conv2d\n")
    (tmp_path / "pkg" / "layers.py").write_text(
        "import equinox as eqx\nimport jax.numpy as jnp\n\n\n"
        "def _scale(x, n):\n    return jnp.sum(x) * n\n\n\n"
        "class Conv(eqx.Module):\n    n: int\n\n"
        "    def __init__(self, num_spatial_dims, n):\n        self.n = n\n\n"
        "    def __call__(self, x):\n        return _scale(x, self.n)\n\n\n"
        "class Conv2d(Conv):\n    def __init__(self, n):\n        super().__init__(2, n)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_layers.py").write_text(
        "import jax.numpy as jnp\nimport pkg\n\n\ndef test_conv2d():\n    pkg.Conv2d(3)(jnp.ones((2, 4, 4)))\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "pkg" / "layers.py")
    finder = CallSiteFinder(index, tmp_path)
    for name in ("_scale", "Conv"):
        entry = next(e for e in found.entrypoints if e.name == name)
        result = finder.find(entry)
        assert [(s.example, s.static) for s in result] == [("tests/test_layers.py::test_conv2d", False)], name
        assert result[0].via is not None and "through Conv" in result[0].via


def test_a_driver_met_first_at_the_depth_limit_is_still_followed_from_nearer(tmp_path: Path) -> None:
    """flax's vae example: ``Encoder`` is built in ``VAE.setup``, ``VAE`` by ``model()``, which
    ``train_step`` and ``train_and_evaluate`` call, and ``main.py`` runs ``train_and_evaluate``.
    Reached first through ``train_step`` (one level deeper), ``train_and_evaluate`` sits at the
    depth limit; its example must still be found through ``model`` (it was not: a cut-short
    result was remembered)."""
    (tmp_path / "models.py").write_text(
        "import flax.linen as nn\n\n\n"
        "class Encoder(nn.Module):\n    latents: int\n\n    @nn.compact\n"
        "    def __call__(self, x):\n        return nn.Dense(self.latents)(x)\n\n\n"
        "class VAE(nn.Module):\n    latents: int = 20\n\n"
        "    def setup(self):\n        self.encoder = Encoder(self.latents)\n\n"
        "    def __call__(self, x):\n        return self.encoder(x)\n\n\n"
        "def model(latents):\n    return VAE(latents=latents)\n"
    )
    (tmp_path / "train.py").write_text(
        "import jax\nimport models\n\n\n"
        "def train_step(state, batch):\n    return models.model(3).apply(state, batch)\n\n\n"
        "def train_and_evaluate(config):\n    params = models.model(3).init(jax.random.key(0), config)\n"
        "    return train_step(params, config)\n"
    )
    (tmp_path / "main.py").write_text(
        "import train\n\n\ndef main(argv):\n    train.train_and_evaluate(argv)\n\n\n"
        "if __name__ == '__main__':\n    main(None)\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "models.py")
    finder = CallSiteFinder(index, tmp_path, Classifier(index))
    for name in ("Encoder", "VAE"):
        entry = next(e for e in found.entrypoints if e.name == name)
        assert [s.example for s in finder.find(entry)] == ["main.py"], name


def test_a_module_handing_the_target_to_a_library_call_is_an_example(tmp_path: Path) -> None:
    """Equinox's stateful example: ``eqx.nn.make_with_state(Model)(key)`` at the top level runs
    ``Model``; only hand-offs to workspace functions are left to the examples of their users."""
    (tmp_path / "toy.py").write_text(
        "import equinox as eqx\nimport jax\n\n\n"
        "class Model(eqx.Module):\n    norm: eqx.nn.BatchNorm\n\n"
        "    def __init__(self, key):\n        self.norm = eqx.nn.BatchNorm(3, axis_name='batch')\n\n"
        "    def __call__(self, x, state):\n        return self.norm(x, state)\n\n\n"
        "model, state = eqx.nn.make_with_state(Model)(jax.random.key(0))\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "toy.py")
    entry = next(e for e in found.entrypoints if e.name == "Model")
    result = CallSiteFinder(index, tmp_path, Classifier(index)).find(entry)
    assert [(s.example, s.line, s.static, s.via) for s in result] == [("toy.py", 15, False, "uses it here")]


def test_a_step_chosen_by_a_condition_is_reached_through_its_user(tmp_path: Path) -> None:
    """flax's gemma example: ``jit_fn(nnx_eval_step if cfg.nnx else jax_eval_step)`` in the
    driver; the value is not worked out, but the name can only be the step of the same file."""
    (tmp_path / "train.py").write_text(
        "import jax\nimport jax.numpy as jnp\nfrom flax import nnx\n\n\n"
        "def jax_eval_step(params, batch):\n    return jnp.mean(batch * params)\n\n\n"
        "def nnx_eval_step(model, batch):\n    return jnp.mean(model(batch))\n\n\n"
        "def train_and_evaluate(config, batches):\n    jit_fn = nnx.jit if config.nnx else jax.jit\n"
        "    step = jit_fn(nnx_eval_step if config.nnx else jax_eval_step)\n"
        "    return [step(config.params, b) for b in batches]\n\n\n"
        "if __name__ == '__main__':\n    train_and_evaluate(None, [])\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "train.py")
    entry = next(e for e in found.entrypoints if e.name == "jax_eval_step")
    result = CallSiteFinder(index, tmp_path, Classifier(index)).find(entry)
    assert [(s.example, s.via) for s in result] == [("train.py", "through train_and_evaluate (train.py:14)")]


def test_a_re_exported_class_built_from_a_config_table_is_reached(tmp_path: Path) -> None:
    """google-research/vision_transformer: ``models.py`` re-exports ``MlpMixer =
    models_mixer.MlpMixer`` and builds it as ``MlpMixer(**CONFIGS[name], **kw)`` (values not
    worked out); the tests of ``get_model`` reach it."""
    (tmp_path / "vit").mkdir()
    (tmp_path / "vit" / "__init__.py").write_text("")
    (tmp_path / "vit" / "models_mixer.py").write_text(
        "import flax.linen as nn\n\n\nclass MlpMixer(nn.Module):\n    width: int\n\n    @nn.compact\n"
        "    def __call__(self, x):\n        return nn.Dense(self.width)(x)\n"
    )
    (tmp_path / "vit" / "models.py").write_text(
        "from vit import models_mixer\n\nCONFIGS = {}\nMlpMixer = models_mixer.MlpMixer\n\n\n"
        "def get_model(name, **kw):\n    return MlpMixer(**CONFIGS[name], **kw)\n"
    )
    (tmp_path / "vit" / "models_test.py").write_text(
        "from vit import models\n\n\ndef test_can_instantiate():\n    models.get_model('Mixer-B_16')\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "vit" / "models_mixer.py")
    entry = next(e for e in found.entrypoints if e.name == "MlpMixer")
    result = CallSiteFinder(index, tmp_path, Classifier(index)).find(entry)
    assert [(s.example, s.via) for s in result] == [
        ("vit/models_test.py::test_can_instantiate", "through get_model (vit/models.py:7)")
    ]


def test_users_of_a_function_the_target_is_handed_to_come_last(tmp_path: Path) -> None:
    """equinox's ``_inferences`` is handed to ``tree_at`` inside ``inference_mode``: the tests of
    ``inference_mode`` run it; the many tests of ``tree_at`` seldom do, and come after them (all
    eight tests one run takes were ``tree_at``'s, and none reached it)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tree.py").write_text(
        "import jax\n\n\ndef tree_at(where, tree, value):\n    return jax.tree.map(lambda x: x, tree)\n"
    )
    (tmp_path / "pkg" / "inference.py").write_text(
        "import jax.numpy as jnp\n\nfrom pkg.tree import tree_at\n\n\n"
        "def _flags(tree):\n    return [jnp.asarray(x) for x in tree]\n\n\n"
        "def inference_mode(tree):\n    return tree_at(_flags, tree, True)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a_tree.py").write_text(
        "from pkg.tree import tree_at\n\n\ndef test_tree_at():\n    tree_at(len, [1], 2)\n"
    )
    (tmp_path / "tests" / "test_b_inference.py").write_text(
        "from pkg.inference import inference_mode\n\n\ndef test_inference():\n    inference_mode([1.0])\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "pkg" / "inference.py")
    entry = next(e for e in found.entrypoints if e.name == "_flags")
    result = CallSiteFinder(index, tmp_path, Classifier(index)).find(entry)
    assert [(s.example, s.handed) for s in result] == [
        ("tests/test_b_inference.py::test_inference", False),
        ("tests/test_a_tree.py::test_tree_at", True),
    ]


def test_a_function_defined_in_the_main_block_makes_the_script_an_example(tmp_path: Path) -> None:
    """JAX's own examples: ``loss`` is used only by ``update``, defined inside ``if __name__ ==
    "__main__":``; the script is an example of it. Another script with its own ``loss`` is not."""
    (tmp_path / "examples").mkdir()
    main = (
        "import jax\nimport jax.numpy as jnp\n\n\ndef loss(params, batch):\n    return jnp.sum(params * batch)\n\n\n"
        "if __name__ == '__main__':\n    @jax.jit\n    def update(params, batch):\n"
        "        return params - jax.grad(loss)(params, batch)\n\n"
        "    print(update(jnp.ones(3), jnp.ones(3)))\n"
    )
    (tmp_path / "examples" / "classifier.py").write_text(main)
    (tmp_path / "examples" / "fromscratch.py").write_text(main)  # the same names, its own loss
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "examples" / "classifier.py")
    entry = next(e for e in found.entrypoints if e.name == "loss")
    result = CallSiteFinder(index, tmp_path, Classifier(index)).find(entry)
    assert [(s.example, s.line, s.via) for s in result] == [("examples/classifier.py", 12, "uses it here")]


def test_a_file_with_its_own_definition_of_a_users_name_is_not_reached_through_it(tmp_path: Path) -> None:
    """JAX's examples: ``predict`` is used by ``loss`` in mnist_classifier_fromscratch.py, and
    other scripts of the package define and use their own ``loss``; they do not reach it, and the
    script's own use ranks before any use through another definition."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "__init__.py").write_text("")
    (tmp_path / "examples" / "fromscratch.py").write_text(
        "import jax.numpy as jnp\n\n\ndef predict(params, x):\n    return jnp.tanh(x @ params)\n\n\n"
        "def loss(params, batch):\n    return jnp.sum(predict(params, batch))\n\n\n"
        "if __name__ == '__main__':\n    data = load()\n    print(loss(data, data))\n"
    )
    (tmp_path / "examples" / "vae.py").write_text(
        "import jax.numpy as jnp\nfrom examples import datasets\n\n\n"
        "def loss(params, batch):\n    return jnp.mean(batch)\n\n\n"
        "if __name__ == '__main__':\n    print(loss(1.0, jnp.ones(3)))\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "examples" / "fromscratch.py")
    entry = next(e for e in found.entrypoints if e.name == "predict")
    result = CallSiteFinder(index, tmp_path, Classifier(index)).find(entry)
    assert [s.example for s in result if not s.static] == ["examples/fromscratch.py"]


def test_a_call_over_several_lines_in_a_block_reads_the_values_at_its_own_line(tmp_path: Path) -> None:
    """JAX's spmd_mnist_classifier_fromscratch.py: ``accuracy(\\n params, (x, y)\\n)`` inside
    ``if __name__ == "__main__":``. The call was placed at the block's first line, where
    ``params = train_step(...)`` is not yet bound, and the name fell back to the callee: a
    "complete" site whose input was ``{ ref = "...:train_step" }``."""
    (tmp_path / "spmd.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef train_step(params, batch):\n    return params\n\n\n"
        "@jax.jit\ndef accuracy(params, batch):\n    return jnp.mean(params @ batch[0])\n\n\n"
        "if __name__ == '__main__':\n    params = jnp.ones((3, 2))\n    x = jnp.ones((2, 3))\n"
        "    for i in range(2):\n        params = train_step(params, x)\n"
        "    acc = accuracy(\n        params, (x, x)\n    )\n"
    )
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(tmp_path / "spmd.py")
    entry = next(e for e in found.entrypoints if e.name == "accuracy")
    best = CallSiteFinder(index, tmp_path, Classifier(index)).find(entry)[0]
    assert (best.line, best.complete) == (20, False)
    assert [m.why for m in best.missing] == ["the result of train_step(...) at line 19"]


def test_ranking_order(finder: CallSiteFinder) -> None:
    found = sites(finder, "zoo/resnet.py::ResNet")
    assert found == sorted(found, key=CallSite.rank)
    ranks = [s.rank()[:2] for s in found]
    assert ranks == sorted(ranks)


def test_project_root_rule(tmp_path: Path) -> None:
    assert project_root(REPO / "zoo" / "resnet.py") == REPO  # pyproject.toml
    (tmp_path / "a" / "pkg").mkdir(parents=True)
    (tmp_path / "a" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "a" / "pkg" / "m.py").write_text("")
    assert project_root(tmp_path / "a" / "pkg" / "m.py") == tmp_path / "a"  # no workspace: above the package
    # no marker up to the workspace folder (a repository unpacked without .git): that folder, not
    # the target's own (whose call-site search found none of the tests beside it)
    (tmp_path / "b" / "models").mkdir(parents=True)
    assert project_root(tmp_path / "b" / "models" / "m.py", tmp_path / "b") == tmp_path / "b"
    assert project_root(tmp_path / "a" / "pkg" / "m.py", tmp_path) == tmp_path
    (tmp_path / "a" / "setup.cfg").write_text("")
    assert project_root(tmp_path / "a" / "pkg" / "m.py", tmp_path) == tmp_path / "a"
    (tmp_path / "a" / "pkg" / "jaxlsp.toml").write_text("version = 1\n")
    assert project_root(tmp_path / "a" / "pkg" / "m.py", tmp_path) == tmp_path / "a" / "pkg"


def test_nothing_is_imported() -> None:
    assert "jax" not in sys.modules or "jax" in sys.modules  # the suite may import jax elsewhere
    import subprocess

    code = (
        "import sys; from pathlib import Path; from jaxlsp.discovery import Classifier, WorkspaceIndex; "
        "from jaxlsp.discovery.callsites.finder import CallSiteFinder; "
        f"root = Path({str(REPO)!r}); index = WorkspaceIndex([root]); c = Classifier(index); "
        "e = next(e for e in c.discover(root / 'zoo' / 'resnet.py').entrypoints if e.name == 'ResNet'); "
        "assert CallSiteFinder(index, root, c).find(e); "
        "bad = [m for m in ('jax', 'flax', 'equinox', 'zoo', 'numpy') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=scaled(120))
