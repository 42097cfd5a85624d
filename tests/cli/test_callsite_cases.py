"""Call-site cases from real repositories (issue 26), each a small folder under
tests/workspaces/callsite_cases laid out as the repository was, through the console script."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.helpers import expanded, run

CASES = Path(__file__).resolve().parents[1] / "workspaces" / "callsite_cases"


def case(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(CASES / name, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_one_file_that_fails_to_import_leaves_the_others_to_run(tmp_path: Path) -> None:
    """pkg/test_a.py imports a package that is not installed; pkg/test_b.py calls Small too: the
    run of both goes on past the collection error and learns the inputs from test_b."""
    root = case("collect_error", tmp_path)
    result = run(["trace", "pkg/models.py::Small", "-o", "small.json"], cwd=root)
    assert result.returncode == 0, result.stderr
    assert expanded(root / "small.json")["target"]["name"] == "Small"


def test_when_no_file_reaches_the_target_the_error_names_each_cause(tmp_path: Path) -> None:
    root = case("collect_error", tmp_path)
    test_b = root / "pkg" / "test_b.py"
    test_b.write_text("import another_missing_package  # noqa: F401\n" + test_b.read_text())
    result = run(["trace", "pkg/models.py::Small", "-o", "small.json"], cwd=root)
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert "collect of pkg/test_a.py" in first and "not_installed_anywhere" in first, first
    assert "collect of pkg/test_b.py" in first and "another_missing_package" in first, first
    assert not (root / "small.json").exists()


def test_a_use_counts_only_where_the_name_is_the_targets_own_module(tmp_path: Path) -> None:
    """proj/models/a/modeling.py and proj/models/b/modeling.py both define ``forward``; only a's
    test calls a's (``modeling.forward`` with ``from proj.models.a import modeling``), and that
    test file's ``absltest.main()`` is not b's ``main``, which calls b's ``forward``."""
    root = case("same_named", tmp_path)
    a = run(["examples", "proj/models/a/modeling.py::forward"], cwd=root)
    assert a.returncode == 0, a.stderr
    assert "[tests/test_a.py::ATest::test_forward]" in a.stdout
    b = run(["examples", "proj/models/b/modeling.py::forward"], cwd=root)
    assert b.returncode == 0, b.stderr
    assert "tests/test_a.py" not in b.stdout, b.stdout
    none = run(["examples", "proj/models/b/modeling.py::unused"], cwd=root)
    assert none.stdout.strip() == "no call site of unused under ."  # workspace-relative, as graphs are


def test_a_script_that_requires_arguments_is_not_run_without_them(tmp_path: Path) -> None:
    """tool/__main__.py parses a required positional argument: run with none it exits 2 with its
    usage, so it is offered as a choice (with the arguments to add) but not run."""
    root = case("main_needs_args", tmp_path)
    result = run(["trace", "tool/ops.py::step", "-o", "step.json"], cwd=root)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "running tool/__main__.py" not in result.stdout
    assert "  tool/__main__.py  (script, tool/__main__.py:12)" in result.stderr.splitlines()


def test_classes_listed_in_parametrize_from_folders_without_init(tmp_path: Path) -> None:
    """No ``__init__.py`` anywhere (pytest's rootdir-based imports): ``from pkg import models as
    mm`` with ``mm.Small`` in a parametrize list, and ``from extra import layers`` found through
    pytest's ``pythonpath = ["lib"]`` in pyproject.toml."""
    root = case("no_init", tmp_path)
    small = run(["examples", "pkg/models.py::Small"], cwd=root)
    assert "1. tests/test_models.py:13 (test) run to learn  [tests/test_models.py::test_init]" in small.stdout
    wide = run(["examples", "lib/extra/layers.py::Wide"], cwd=root)
    assert "1. tests/test_layers.py:12 (test) run to learn  [tests/test_layers.py::test_wide]" in wide.stdout
    traced = run(["trace", "pkg/models.py::Small", "-o", "small.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout.startswith("running tests/test_models.py::test_init to learn the inputs")


def test_configs_from_classmethods_and_staticmethods_are_followed(tmp_path: Path) -> None:
    """``ModelConfig.small()`` (a classmethod: ``return cls(dim=4, hidden=8)``) and
    ``config_lib.ModelConfig.base_1b()`` (a staticmethod, in a unittest ``setUp``, whose field
    ``self.cfg.dim`` gives the input's shape): each site is complete without running anything."""
    root = case("config_factory", tmp_path)
    result = run(["examples", "zoo/model.py::Model", "--json"], cwd=root)
    assert result.returncode == 0, result.stderr
    sites = {s["example"]: s for s in json.loads(result.stdout) if s["static"]}
    small = sites["tests/test_model.py::test_small"]
    assert small["complete"], small
    assert small["init"]["args"] == [{"ref": "zoo.config:ModelConfig", "kwargs": {"dim": 4, "hidden": 8, "layers": 2}}]
    base = sites["tests/test_model.py::test_base"]
    assert base["init"]["args"][0]["kwargs"] == {"dim": 16, "hidden": 32, "layers": 1}
    unit = sites["tests/test_unit.py::ModelTest::test_forward"]
    assert unit["complete"], unit
    assert unit["inputs"]["args"][0]["shape"] == [2, 16]
    traced = run(["trace", "zoo/model.py::Model", "-o", "model.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "to learn the inputs" not in traced.stdout  # nothing of the workspace ran but the model
    assert "inputs from tests/test_model.py:11 (test)" in traced.stdout.splitlines()


def test_a_failed_traces_place_is_workspace_relative(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "ops.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef bad(x):\n    return x @ jnp.ones((5, 5))\n"
    )
    (root / "tests" / "test_ops.py").write_text(
        "import jax.numpy as jnp\n\nfrom ops import bad\n\n\ndef test_bad():\n    bad(jnp.ones((2, 3)))\n"
    )
    result = run(["trace", "ops.py::bad", "-o", "bad.json"], cwd=root)
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert " at ops.py:7:" in first, first
    assert str(tmp_path) not in first


def test_a_target_passed_in_a_partial_alias_is_reached_through_that_alias(tmp_path: Path) -> None:
    """``Small = partial(Net, block_cls=Block)``: the tests that use Small run Block; one that
    uses ``Other = partial(Net, block_cls=OtherBlock)`` does not, though it uses Net too (as
    jax-resnet's ResNeSt tests do not run ``ResNetBlock``). A test file's helper that uses Small
    (``_run_small``) is reached through the test that calls it, not by running the whole file."""
    root = case("partial_aliases", tmp_path)
    result = run(["examples", "nets/blocks.py::Block", "--json"], cwd=root)
    assert result.returncode == 0, result.stderr
    assert [(s["example"], s["via"]) for s in json.loads(result.stdout)] == [
        ("tests/test_nets.py::test_small", "through Small (passed to it at nets/blocks.py:26)"),
        ("tests/test_nets.py::test_through_a_helper", "through Small (passed to it at nets/blocks.py:26)"),
    ]


def test_names_through_star_imports_of_a_package_that_re_exports(tmp_path: Path) -> None:
    """``from nets import *`` in a test, nets/__init__.py re-exporting ``from .blocks import *``
    (as jax-resnet's tests and package do): ``Net()`` there is nets/blocks.py's Net."""
    root = case("partial_aliases", tmp_path)
    result = run(["examples", "nets/blocks.py::Net"], cwd=root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1. tests/test_star.py:8 (test) complete  [tests/test_star.py::test_star]")


def test_a_test_class_not_named_test_is_an_example_through_a_helper_module(tmp_path: Path) -> None:
    """flaxformer's layout: ``class DecTest(absltest.TestCase)`` in pkg/arch_test.py builds the
    target through ``tu.make_dec()`` of pkg/arch_test_utils.py. The test class is the example (a
    class is a test whatever its name), not a helper to follow to callers; the file that only
    imports the target's module (pkg/other_test.py) is not. Found by the real-repository
    measurement: flaxformer's DecoderOnly and two distreqx targets had traced before this round."""
    root = case("test_utils_module", tmp_path)
    found = run(["examples", "pkg/arch.py::Dec"], cwd=root)
    assert found.returncode == 0, found.stderr
    first = found.stdout.splitlines()[0]
    assert "[pkg/arch_test.py::DecTest::test_shapes]" in first, found.stdout
    traced = run(["trace", "pkg/arch.py::Dec", "-o", "dec.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "arch_test.py" in traced.stdout


def test_a_call_expected_to_raise_is_no_complete_example(tmp_path: Path) -> None:
    """distreqx's layout: ``test_raises`` (``with self.assertRaises(ValueError): M().init(key, x,
    strict=True)``) comes before ``test_ok`` in the file, and ``pytest.raises`` wraps a call of
    ``scale`` before the test that calls it as meant. The failing calls are partial and come last;
    the traces take their inputs from the tests that do not expect an error. Found by the
    real-repository measurement (repro r3): the trace re-raised the expected ValueError."""
    root = case("expects_error", tmp_path)
    found = run(["examples", "pkg/mod.py::M", "--json"], cwd=root)
    assert found.returncode == 0, found.stderr
    sites = json.loads(found.stdout)
    assert sites[0]["example"] == "tests/test_mod.py::MTest::test_ok" and sites[0]["complete"], sites[0]
    raising = [s for s in sites if s["example"] == "tests/test_mod.py::MTest::test_raises"]
    assert raising and not any(s["complete"] for s in raising), raising
    assert all(s["example"] != "tests/test_mod.py::MTest::test_raises" for s in sites[: len(sites) - len(raising)])
    static = next(s for s in raising if s["static"])
    assert [m["where"] for m in static["missing"]] == ["raises"], static
    for target, line in (("pkg/mod.py::M", "tests/test_mod.py:15"), ("pkg/mod.py::scale", "tests/test_scale.py:13")):
        traced = run(["trace", target, "-o", "out.json"], cwd=root)
        assert traced.returncode == 0, traced.stderr
        assert f"inputs from {line} (test)" in traced.stdout.splitlines()


def test_every_test_of_a_class_that_names_the_user_is_an_example(tmp_path: Path) -> None:
    """distreqx's layout: ``class BTest(TestCase)`` with ``test_props`` (``B()`` only) before
    ``test_forward`` (``B().forward(x)``, which calls ``_helper``). Both tests are examples of
    ``_helper``, in file order, and the run goes on past the first to the one that calls it.
    Found by the real-repository measurement (repro r2): only ``test_props`` ran, rc 1."""
    root = case("class_tests", tmp_path)
    found = run(["examples", "pkg/bij.py::_helper", "--json"], cwd=root)
    assert found.returncode == 0, found.stderr
    assert [s["example"] for s in json.loads(found.stdout)] == [
        "tests/test_b.py::BTest::test_props",
        "tests/test_b.py::BTest::test_forward",
    ]
    traced = run(["trace", "pkg/bij.py::_helper", "-o", "helper.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert expanded(root / "helper.json")["target"]["name"] == "_helper"


def test_a_library_call_on_an_array_spec_is_evaluated_abstractly(tmp_path: Path) -> None:
    """A test's ``a = jnp.abs(jax.random.normal(key, (2, 3)))`` is a complete static input ``{ ref
    = "jax.numpy:abs", args = [array spec] }``: the worker calls jnp.abs under ``jax.eval_shape``,
    not on the ShapeDtypeStruct. Found by the real-repository measurement (repro r1): the trace
    failed with "ShapeDtypeStruct is not a valid JAX type"."""
    root = case("library_refs", tmp_path)
    found = run(["examples", "pkg/m.py::f", "--json"], cwd=root)
    assert found.returncode == 0, found.stderr
    first = json.loads(found.stdout)[0]
    assert first["complete"] and first["inputs"]["args"][0]["ref"] == "jax.numpy:abs", first
    traced = run(["trace", "pkg/m.py::f", "-o", "f.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "inputs from tests/test_m.py:10 (test)" in traced.stdout.splitlines()
    assert "outputs  out     f32[2,3]         output" in traced.stdout.splitlines()
