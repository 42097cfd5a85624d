"""Finding a recipe, choosing a profile, key-path lines, and TOML written back (round trips)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxlsp.recipes import (
    NeedsInput,
    RecipeError,
    Resolved,
    find_recipe,
    format_key_path,
    load_recipe,
    parse_key_path,
    parse_recipe,
    render_profile,
    render_recipe,
    select_profile,
)
from jaxlsp.recipes.locate import line_of, locate
from tests.recipes.test_helpers import write

# -- find_recipe --------------------------------------------------------------------------------


def test_the_nearest_recipe_inside_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "m.py").write_text("")
    assert find_recipe(deep / "m.py", root) is None
    (tmp_path / "jaxlsp.toml").write_text("")  # above the root: never used
    assert find_recipe(deep / "m.py", root) is None
    (root / "jaxlsp.toml").write_text("")
    assert find_recipe(deep / "m.py", root) == root / "jaxlsp.toml"
    (root / "a" / "jaxlsp.toml").write_text("")
    assert find_recipe(deep / "m.py", root) == root / "a" / "jaxlsp.toml"
    (deep / "jaxlsp.toml").write_text("")
    assert find_recipe(deep / "m.py", root) == deep / "jaxlsp.toml"
    assert find_recipe(deep, root) == deep / "jaxlsp.toml"  # a folder is its own start


def test_a_target_outside_the_workspace_has_no_recipe(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "jaxlsp.toml").write_text("")
    assert find_recipe(tmp_path / "other" / "m.py", tmp_path / "ws") is None
    (tmp_path / "jaxlsp.toml").unlink()
    (tmp_path / "ws" / "jaxlsp.toml").mkdir()  # a folder named jaxlsp.toml is not a recipe
    assert find_recipe(tmp_path / "ws" / "m.py", tmp_path / "ws") is None


def test_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "jaxlsp.toml").write_text("")
    monkeypatch.chdir(tmp_path / "pkg")
    assert find_recipe("m.py", "..") == tmp_path / "jaxlsp.toml"


# -- select_profile -----------------------------------------------------------------------------

RECIPE = """\
version = 1

[profiles.one]
target = "model.py::f"

[profiles.enc]
target = "model.py::MLP.encode"

[profiles.a]
target = "model.py::g"

[profiles.b]
target = "./model.py::g"
seed = 1
"""


def test_select_by_target(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, RECIPE))
    one = select_profile(recipe, tmp_path / "model.py", "f")
    assert isinstance(one, Resolved) and one.name == "one" and one.profile["name"] == "one"
    method = select_profile(recipe, tmp_path / "model.py", "MLP")  # a method of the class
    assert isinstance(method, Resolved) and method.name == "enc"


def test_several_matching_profiles_are_an_error(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, RECIPE))
    with pytest.raises(RecipeError) as info:
        select_profile(recipe, tmp_path / "model.py", "g")
    assert str(info.value) == (
        f"{tmp_path / 'jaxlsp.toml'}:12: profiles: several profiles target g: a (line 9), b (line 12); "
        "choose one by its name"
    )
    chosen = select_profile(recipe, tmp_path / "model.py", "g", "b")
    assert isinstance(chosen, Resolved) and chosen.profile["seed"] == 1


def test_select_by_name_checks_the_target(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, RECIPE))
    by_name = select_profile(recipe, None, None, "one")
    assert isinstance(by_name, Resolved) and by_name.target["name"] == "f"
    with pytest.raises(RecipeError, match=r":4: profiles\.one\.target: profile one targets f in .*, not g in"):
        select_profile(recipe, tmp_path / "model.py", "g", "one")
    with pytest.raises(RecipeError, match=r"profiles: no profile nope \(profiles: one, enc, a, b\)"):
        select_profile(recipe, tmp_path / "model.py", "g", "nope")
    with pytest.raises(RecipeError, match=r"no jaxlsp\.toml found to hold a profile x"):
        select_profile(None, tmp_path / "model.py", "g", "x")


def test_a_profile_whose_file_is_gone(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, 'version = 1\n[profiles.p]\ntarget = "gone.py::f"\n'))
    with pytest.raises(RecipeError, match=r":3: profiles\.p\.target: no such file: .*gone\.py"):
        select_profile(recipe, None, None, "p")


def test_no_matching_profile_gives_a_proposal(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, RECIPE))
    (tmp_path / "sub").mkdir()
    result = select_profile(recipe, tmp_path / "sub" / "other.py", "h")
    assert isinstance(result, NeedsInput)
    assert result.name == "h" and result.recipe is None and result.base == tmp_path
    assert result.proposal == {"target": "sub/other.py::h"}
    assert [m["path"] for m in result.missing] == ["profiles.h.inputs"]
    taken = select_profile(recipe, tmp_path / "model.py", "one")  # a target named like a profile
    assert isinstance(taken, NeedsInput) and taken.name == "one_2"
    alone = select_profile(None, tmp_path / "sub" / "other.py", "h", workspace_root=tmp_path / "sub")
    assert isinstance(alone, NeedsInput) and alone.proposal == {"target": "other.py::h"}
    with pytest.raises(RecipeError, match="no profile given and no target"):
        select_profile(None, None, None)


# -- key paths and their lines ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["profiles.mlp.inputs.args[0].shape[1]", 'profiles."a.b".dims."x y"', "a[0][1].b", 'profiles."q\\"uote"'],
)
def test_key_paths_round_trip(text: str) -> None:
    assert format_key_path(parse_key_path(text)) == text


@pytest.mark.parametrize("text", ["", "a..b", "[0]", "a[x]", "a b"])
def test_malformed_key_paths(text: str) -> None:
    with pytest.raises(ValueError):
        parse_key_path(text)


LOCATED = '''\
# a comment [not.a.table]
version = 1
[profiles."my.mlp"]   # a quoted name
target = "m.py::f"  # "tricky" ' quotes
doc = """
several
lines = 3
"""
raw = \'\'\'x = [\'\'\'
inputs.args = [
    1,
    { kind = "array", shape = [
        2,
        "b",
    ] },
    [ [3], 4 ],
]
inputs.kwargs = { a = { b = 1, c = [
  2] } }
dims.b = 4
[[many]]
x = 1
[[many]]
x = 2
'''


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("version",), 2),
        (("profiles", "my.mlp"), 3),
        (("profiles", "my.mlp", "target"), 4),
        (("profiles", "my.mlp", "doc"), 5),
        (("profiles", "my.mlp", "raw"), 9),
        (("profiles", "my.mlp", "inputs"), 10),
        (("profiles", "my.mlp", "inputs", "args"), 10),
        (("profiles", "my.mlp", "inputs", "args", 0), 11),
        (("profiles", "my.mlp", "inputs", "args", 1), 12),
        (("profiles", "my.mlp", "inputs", "args", 1, "kind"), 12),
        (("profiles", "my.mlp", "inputs", "args", 1, "shape", 0), 13),
        (("profiles", "my.mlp", "inputs", "args", 1, "shape", 1), 14),
        (("profiles", "my.mlp", "inputs", "args", 2, 0, 0), 16),
        (("profiles", "my.mlp", "inputs", "args", 2, 1), 16),
        (("profiles", "my.mlp", "inputs", "kwargs", "a", "b"), 18),
        (("profiles", "my.mlp", "inputs", "kwargs", "a", "c"), 18),
        (("profiles", "my.mlp", "inputs", "kwargs", "a", "c", 0), 19),
        (("profiles", "my.mlp", "dims", "b"), 20),
        (("many", 0, "x"), 22),
        (("many", 1, "x"), 24),
        (("profiles", "my.mlp", "inputs", "args", 1, "dtype"), 12),  # missing: its table
        (("profiles", "my.mlp", "nothing", "here"), 3),
        (("nowhere",), None),
    ],
)
def test_lines_of_key_paths(path: tuple[str | int, ...], line: int | None) -> None:
    tomllib.loads(LOCATED)  # the locator only reads valid TOML
    assert line_of(locate(LOCATED), path) == line


# -- render_profile -----------------------------------------------------------------------------

FULL = """\
version = 1

[profiles.full]
target = "model.py::MLP"
kind = "linen"
device = "cuda:0"
seed = 3
x64 = true
python = "python3"
transform = "grad"
rngs = ["dropout"]
mutable = ["batch_stats"]
load = "definitions"
symbolic = ["seq"]
dims = { batch = 2 }
init = { args = [4, { "odd key" = "a\\"b\\u0001" }], kwargs = { act = { ref = "jax.nn:relu" } } }
inputs.args = [{ kind = "array", shape = ["batch", "seq", 3], dtype = "float64", generator = { kind = "uniform", low = -1.5 } }]
inputs.kwargs = { train = false, rng = { kind = "key", seed = 4 }, tree = { a = [1, 2.5e-8, { kind = "none" }] }, args = [1] }

[profiles."with.dots"]
target = "model.py::f"
inputs = { factory = "data:make" }
"""


def test_render_round_trip(tmp_path: Path) -> None:
    first = load_recipe(write(tmp_path, FULL))
    text = render_recipe(first.tables)
    assert tomllib.loads(text)["profiles"] == first.tables
    second = parse_recipe(text, tmp_path / "jaxlsp.toml")
    for name in first.tables:
        a, b = first.results[name], second.results[name]
        assert isinstance(a, Resolved) and isinstance(b, Resolved)
        assert a.profile == b.profile and a.target == b.target and a.python == b.python


def test_render_layout() -> None:
    table = {
        "target": "m.py::f",
        "dims": {"b": 2},
        "inputs": {"args": [{"kind": "array", "shape": ["b"]}], "kwargs": {"x": 1, "y": {"kind": "none"}}},
    }
    assert render_profile("p", table) == (
        "[profiles.p]\n"
        'target = "m.py::f"\n'
        "\n"
        "[profiles.p.dims]\n"
        "b = 2\n"
        "\n"
        "[profiles.p.inputs]\n"
        "args = [\n"
        '    { kind = "array", shape = ["b"] },\n'
        "]\n"
        "\n"
        "[profiles.p.inputs.kwargs]\n"
        "x = 1\n"
        'y = { kind = "none" }\n'
    )


def test_render_writes_needs_input_comments() -> None:
    missing = [
        {"path": "profiles.p.dims.b", "message": "the size of b"},
        {"path": "profiles.p.inputs", "message": "the call arguments"},
        {"path": "profiles.p.seed", "message": "a seed"},
    ]
    text = render_profile("p", {"target": "m.py::f"}, missing)
    assert text == (
        "[profiles.p]\n"
        "# needs input: profiles.p.seed: a seed\n"
        'target = "m.py::f"\n'
        "\n"
        "# needs input: profiles.p.dims.b: the size of b\n"
        "\n"
        "# needs input: profiles.p.inputs: the call arguments\n"
    )
    assert tomllib.loads(text) == {"profiles": {"p": {"target": "m.py::f"}}}


_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
_scalars = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), _floats, st.text(max_size=8))
_arrays = st.fixed_dictionaries(
    {"kind": st.just("array"), "shape": st.lists(st.integers(1, 4) | st.sampled_from(["b", "s"]), max_size=3)},
    optional={
        "dtype": st.sampled_from(["float32", "bfloat16", "int8", "bool"]),
        "generator": st.sampled_from([{"kind": "zeros"}, {"kind": "full", "value": 1}, {"kind": "ones"}]),
    },
)
_specs = st.recursive(
    _scalars | _arrays | st.just({"kind": "none"}) | st.builds(lambda s: {"kind": "key", "seed": s}, st.integers(0, 9)),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(_names.filter(lambda n: n not in ("kind", "ref")), inner, max_size=3)
    ),
    max_leaves=8,
)


def _fix_generators(value: Any) -> Any:
    """Keep generated full values in the array's dtype (true for bool arrays)."""
    if isinstance(value, list):
        return [_fix_generators(v) for v in value]
    if isinstance(value, dict):
        out = {k: _fix_generators(v) for k, v in value.items()}
        if out.get("kind") == "array" and out.get("dtype") == "bool" and out.get("generator", {}).get("kind") == "full":
            out["generator"] = {"kind": "full", "value": True}
        return out
    return value


@settings(max_examples=60, deadline=None)
@given(
    name=st.text(min_size=1, max_size=8),
    args=st.lists(_specs, max_size=4),
    kwargs=st.dictionaries(_names, _specs, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    device=st.sampled_from(["cpu", "cuda:0", "cuda:3"]),
)
def test_render_round_trip_property(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    seed: int,
    device: str,
) -> None:
    table = {
        "target": "model.py::f",
        "device": device,
        "seed": seed,
        "dims": {"b": 2, "s": 3},
        "inputs": {"args": _fix_generators(args), "kwargs": _fix_generators(kwargs)},
    }
    text = render_recipe({name: table})
    loaded = tomllib.loads(text)["profiles"][name]
    assert _same(loaded, table)
    located = locate(text)
    for path in _leaf_paths(("profiles", name), loaded):
        assert path in located, path
    folder = tmp_path_factory.mktemp("rt")
    (folder / "model.py").write_text("")
    recipe = parse_recipe(text, folder / "jaxlsp.toml")
    result = recipe.results[name]
    assert isinstance(result, Resolved)
    again = parse_recipe(render_recipe(recipe.tables), folder / "jaxlsp.toml").results[name]
    assert isinstance(again, Resolved) and again.profile == result.profile


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _leaf_paths(prefix: tuple[str | int, ...], value: Any) -> list[tuple[str | int, ...]]:
    if isinstance(value, dict):
        return [prefix] + [p for k, v in value.items() for p in _leaf_paths((*prefix, k), v)]
    if isinstance(value, list):
        return [prefix] + [p for i, v in enumerate(value) for p in _leaf_paths((*prefix, i), v)]
    return [prefix]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab=[]{},.\"'#\n \\13", max_size=40))
def test_the_locator_never_hangs_on_broken_text(text: str) -> None:
    locate(text)


# -- one broken profile does not refuse the others ----------------------------------------------

BROKEN_BESIDE_GOOD = """\
version = 1

[profiles.good]
target = "model.py::f"
inputs.args = [{ kind = "array", shape = [2] }]

[profiles.broken]
target = "model.py::g"
requires_grad = true
inputs.args = [{ kind = "array", shape = [2], dtype = "float128" }]
"""


def test_a_broken_profile_refuses_only_itself(tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN_BESIDE_GOOD)
    with pytest.raises(RecipeError):  # checking the file (strict) still lists every problem
        load_recipe(path)
    recipe = load_recipe(path, strict=False)
    good = select_profile(recipe, tmp_path / "model.py", "f")
    assert isinstance(good, Resolved) and good.name == "good"
    with pytest.raises(RecipeError) as info:
        select_profile(recipe, tmp_path / "model.py", "g")
    assert [(p.line, p.key_path) for p in info.value.problems] == [
        (9, "profiles.broken.requires_grad"),
        (10, "profiles.broken.inputs.args[0].dtype"),
    ]
    with pytest.raises(RecipeError) as named:
        select_profile(recipe, tmp_path / "model.py", "g", "broken")
    assert "transform" in str(named.value)


def test_file_level_problems_still_refuse_the_file(tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe(write(tmp_path, "version = 2\n" + BROKEN_BESIDE_GOOD.split("\n", 1)[1]), strict=False)
    assert [p.key_path for p in info.value.problems] == ["version"]
