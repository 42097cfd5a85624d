"""The ``from`` key and ``mutable = true``; profiles made from static call sites."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlsp.discovery import Classifier, WorkspaceIndex
from jaxlsp.discovery.callsites.finder import CallSiteFinder
from jaxlsp.discovery.callsites.sites import CallSite, Missing
from jaxlsp.recipes import NeedsInput, RecipeError, Resolved, parse_recipe, render_profile
from jaxlsp.recipes.examples import ExampleError, example_kind, parse_example
from jaxlsp.recipes.propose import propose_site

REPO = Path(__file__).resolve().parents[1] / "workspaces" / "callsites_repo"


def load(tmp: Path, body: str) -> dict[str, object]:
    recipe = parse_recipe("version = 1\n\n[profiles.p]\ntarget = 'm.py::f'\n" + body, tmp / "jaxlsp.toml")
    result = recipe.results["p"]
    assert isinstance(result, Resolved)
    return dict(result.profile)


def test_from_a_test_a_script_and_a_module() -> None:
    test = parse_example("tests/test_models.py::test_resnet18", REPO)
    assert test["kind"] == "test" and test["tests"] == [f"{REPO}/tests/test_models.py::test_resnet18"]
    cls = parse_example("tests/test_layers.py::TestX::test_y", REPO)
    assert cls["tests"] == [f"{REPO}/tests/test_layers.py::TestX::test_y"]
    whole = parse_example("tests", REPO)
    assert whole["kind"] == "test" and whole["tests"] == [str(REPO / "tests")]
    script = parse_example("train.py --batch-size 3 --steps '1'", REPO)
    assert (script["kind"], script["argv"]) == ("script", ["--batch-size", "3", "--steps", "1"])
    assert parse_example("toy.py", REPO)["kind"] == "module"
    assert parse_example("zoo/demo_heads.py", REPO)["kind"] == "module"
    assert example_kind(REPO / "train.py") == "script"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope.py", "no such file"),
        ("tests/test_models.py::test_resnet18 --x", "a test takes no arguments"),
        ("tests/test_models.py::", "expected FILE.py::TEST"),
        ("tests/test_models.py::not-a-name", "expected FILE.py::TEST"),
        ("'unclosed", "expected"),
        ("", "an empty string"),
    ],
)
def test_from_errors(text: str, message: str) -> None:
    with pytest.raises(ExampleError, match=message):
        parse_example(text, REPO)


def test_from_in_a_recipe(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text("def test_a():\n    pass\n")
    profile = load(tmp_path, 'from = "tests/test_m.py::test_a"\n')
    assert profile["example"] == {
        "kind": "test",
        "path": str(tmp_path / "tests" / "test_m.py"),
        "text": "tests/test_m.py::test_a",
        "tests": [f"{tmp_path}/tests/test_m.py::test_a"],
    }


def test_from_excludes_inputs_and_init(tmp_path: Path) -> None:
    text = "version = 1\n\n[profiles.p]\ntarget = 'm.py::f'\nfrom = 'x.py'\ninputs = { args = [1] }\n"
    with pytest.raises(RecipeError, match=r"jaxlsp.toml:6: profiles.p.inputs: from learns the inputs from a run"):
        parse_recipe(text, tmp_path / "jaxlsp.toml")
    with pytest.raises(RecipeError, match=r"profiles.p.from: expected \"PATH\[::TEST\]"):
        parse_recipe("version = 1\n\n[profiles.p]\ntarget = 'm.py::f'\nfrom = 3\n", tmp_path / "jaxlsp.toml")


def test_mutable_true(tmp_path: Path) -> None:
    assert load(tmp_path, "kind = 'linen'\nmutable = true\n")["mutable"] is True
    with pytest.raises(RecipeError, match="expected a list of collection names, got false"):
        parse_recipe("version = 1\n\n[profiles.p]\ntarget = 'm.py::f'\nmutable = false\n", tmp_path / "jaxlsp.toml")


def _entry(target: str):  # type: ignore[no-untyped-def]
    rel, _, name = target.partition("::")
    index = WorkspaceIndex([REPO])
    found = Classifier(index).discover((REPO / rel).resolve())
    return index, next(e for e in found.entrypoints if e.name == name)


def test_a_complete_site_resolves_and_renders() -> None:
    index, entry = _entry("zoo/resnet.py::ResNet")
    site = CallSiteFinder(index, REPO).find(entry)[0]
    made = propose_site(entry, site, where=site.where(REPO), base=REPO)
    assert isinstance(made, Resolved)
    assert made.table["target"] == "zoo/resnet.py::ResNet"
    assert made.profile["init"]["kwargs"]["block_cls"] == {"kind": "ref", "ref": "zoo.resnet:ResNetBlock"}
    text = render_profile("ResNet", made.table)
    assert 'block_cls = { ref = "zoo.resnet:ResNetBlock" }' in text


def test_a_partial_site_prefills_and_asks_for_the_rest() -> None:
    _, entry = _entry("zoo/eqx_models.py::Head")
    site = CallSite(
        REPO / "x.py", 3, "test", "x.py::test_a", True,
        init={"args": [16, 4]}, inputs={"args": [{"kind": "array"}]},
        missing=(Missing("inputs.args[0]", "batch is a parameter of test_a"),),
    )  # fmt: skip
    made = propose_site(entry, site, where="x.py:3", base=REPO)
    assert isinstance(made, NeedsInput)
    assert made.proposal["init"] == {"args": [16, 4]}
    assert [m["path"] for m in made.missing] == ["profiles.Head.inputs.args[0]"]
    assert "batch is a parameter of test_a" in made.missing[0]["message"]


def test_a_site_over_the_limits_is_refused() -> None:
    _, entry = _entry("zoo/functions.py::attention")
    big = {"kind": "array", "shape": [4096, 2048]}
    site = CallSite(REPO / "x.py", 1, "test", "x.py", True, inputs={"args": [big, big, big]})
    with pytest.raises(RecipeError, match="over the limit"):
        propose_site(entry, site, where="x.py:1", base=REPO)
