"""Profiles proposed from discovery: jaxtyping shapes, keys, statics, module fields; answers."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.discovery.entrypoints import Entrypoint, Span
from jaxlsp.discovery.summary import SetupField
from jaxlsp.recipes import (
    NeedsInput,
    RecipeError,
    Resolved,
    apply_answers,
    parse_recipe,
    propose,
    render_profile,
    render_recipe,
    select_profile,
)
from jaxlsp.recipes.annotations import ArrayGuess, KeyGuess, RngsGuess, StaticGuess, UnknownGuess, guess
from tests.discovery.helpers import discover

SOURCE = """\
import jax
import flax.linen as nn
from flax import nnx
import equinox as eqx
from jaxtyping import Array, Float, Int, Bool, Shaped, Key, PRNGKeyArray


@jax.jit
def known(x: Float[Array, "4 3"], ids: Int[Array, "4"], mask: Bool[Array, ""], key: PRNGKeyArray, *, scale: float = 2.0, act: str = "relu", cfg=None):
    return x


@jax.jit
def named(x: Float[Array, "batch 3"], y: "Shaped[Array, 'batch seq']", z: jax.Array, n: int, w, /, *rest, **more):
    return x


class MLP(nn.Module):
    features: int
    hidden: int = 32
    rate: float = 0.1

    @nn.compact
    def __call__(self, x, train: bool = False):
        return nn.Dense(self.features)(x)


class Block(nnx.Module):
    def __init__(self, din: int, dout: int = 4, *, rngs: nnx.Rngs):
        self.lin = nnx.Linear(din, dout, rngs=rngs)

    def __call__(self, x):
        return self.lin(x)


class Head(eqx.Module):
    w: jax.Array

    def __init__(self, size: int, key: PRNGKeyArray):
        self.w = jax.random.normal(key, (size,))

    def __call__(self, x):
        return self.w * x


@jax.jit
def wide(x: Float64[Array, "2"], k: Key[Array, ""]):
    return x
"""


@pytest.fixture
def found(tmp_path: Path) -> dict[str, Entrypoint]:
    discovery = discover(tmp_path, {"main.py": SOURCE.replace("Key, PRNGKeyArray", "Key, PRNGKeyArray, Float64")})
    return {e.name: e for e in discovery.entrypoints}


def test_everything_known_resolves(found: dict[str, Entrypoint], tmp_path: Path) -> None:
    result = propose(found["known"])
    assert isinstance(result, Resolved)
    assert result.name == "known" and result.recipe is None
    assert result.table == {
        "target": "main.py::known",
        "kind": "function",
        "inputs": {
            "args": [
                {"kind": "array", "shape": [4, 3]},
                {"kind": "array", "shape": [4], "dtype": "int32"},
                {"kind": "array", "shape": [], "dtype": "bool"},
                {"kind": "key"},
            ],
            "kwargs": {"scale": 2.0, "act": "relu"},
        },
    }
    assert result.profile["name"] is None
    assert result.profile["inputs"]["args"][0] == {
        "kind": "array",
        "shape": [4, 3],
        "dtype": "float32",
        "generator": {"kind": "normal", "seed": 0},
    }
    assert result.profile["inputs"]["kwargs"] == {
        "scale": {"kind": "static", "value": 2.0},
        "act": {"kind": "static", "value": "relu"},
    }
    assert result.target == {"path": str(tmp_path / "main.py"), "name": "known", "kind": "function"}


def test_named_dims_and_unknown_shapes_are_asked_for(found: dict[str, Entrypoint]) -> None:
    result = propose(found["named"])
    assert isinstance(result, NeedsInput)
    assert result.missing == [
        {
            "path": "profiles.named.inputs.args[2].shape",
            "kind": "shape",
            "param": "z",
            "annotation": "jax.Array",
            "message": "the shape of z (jax.Array carries no shape): a list of positive integers and dimension names",
        },
        {
            "path": "profiles.named.inputs.args[3]",
            "kind": "value",
            "param": "n",
            "annotation": "int",
            "message": "a value for n (int): an integer",
        },
        {
            "path": "profiles.named.inputs.args[4]",
            "kind": "value",
            "param": "w",
            "annotation": None,
            "message": "a value for w: an input spec",
        },
        {
            "path": "profiles.named.dims.batch",
            "kind": "dimension",
            "name": "batch",
            "usedAt": ["profiles.named.inputs.args[0].shape[0]", "profiles.named.inputs.args[1].shape[0]"],
            "message": "the size of dimension batch (a positive integer), used at "
            "profiles.named.inputs.args[0].shape[0], profiles.named.inputs.args[1].shape[0]",
        },
        {
            "path": "profiles.named.dims.seq",
            "kind": "dimension",
            "name": "seq",
            "usedAt": ["profiles.named.inputs.args[1].shape[1]"],
            "message": "the size of dimension seq (a positive integer), used at profiles.named.inputs.args[1].shape[1]",
        },
    ]
    half = apply_answers(result, {"profiles.named.dims.batch": 8, "profiles.named.inputs.args[3]": 5})
    assert isinstance(half, NeedsInput)
    assert [m["path"] for m in half.missing] == [
        "profiles.named.inputs.args[2].shape",
        "profiles.named.inputs.args[4]",
        "profiles.named.dims.seq",
    ]
    done = apply_answers(
        half,
        {
            "profiles.named.dims.seq": 16,
            "profiles.named.inputs.args[2].shape": ["batch", 2],
            "profiles.named.inputs.args[4]": {"kind": "array", "shape": [1], "dtype": "int8"},
        },
    )
    assert isinstance(done, Resolved)
    assert [a.get("shape") for a in done.profile["inputs"]["args"]] == [[8, 3], [8, 16], [8, 2], None, [1]]
    assert done.profile["inputs"]["args"][3] == {"kind": "static", "value": 5}
    assert done.table["dims"] == {"batch": 8, "seq": 16}
    # the completed table, saved into a recipe, resolves to the same profile (named this time)
    text = render_recipe({done.name: done.table})
    saved = parse_recipe(text, found["named"].path.parent / "jaxlsp.toml").results["named"]
    assert isinstance(saved, Resolved)
    assert {**saved.profile, "name": None} == done.profile


def test_a_proposal_renders_with_its_questions(found: dict[str, Entrypoint]) -> None:
    result = propose(found["named"])
    assert isinstance(result, NeedsInput)
    text = render_profile(result.name, result.proposal, result.missing)
    assert "# needs input: profiles.named.dims.batch: the size of dimension batch" in text
    assert "# needs input: profiles.named.inputs.args[3]: a value for n (int): an integer" in text
    assert tomllib.loads(text)["profiles"]["named"] == result.proposal
    assert result.to_json()["toml"] == text
    assert result.to_json()["needsInput"] == result.missing


def test_linen_fields_and_call(found: dict[str, Entrypoint]) -> None:
    result = propose(found["MLP"])
    assert isinstance(result, NeedsInput)
    assert result.proposal == {
        "target": "main.py::MLP",
        "kind": "linen",
        "init": {"kwargs": {"features": {"kind": "array"}, "hidden": 32, "rate": 0.1}},
    }
    assert [(m["path"], m["kind"]) for m in result.missing] == [
        ("profiles.MLP.init.kwargs.features", "value"),
        ("profiles.MLP.inputs", "inputs"),
    ]
    done = apply_answers(
        result,
        {
            "profiles.MLP.init.kwargs.features": 10,
            "profiles.MLP.inputs": {"args": [{"kind": "array", "shape": [2, 5]}], "kwargs": {"train": False}},
        },
    )
    assert isinstance(done, Resolved)
    assert done.profile["init"]["kwargs"]["features"] == {"kind": "static", "value": 10}
    assert done.profile["inputs"]["kwargs"] == {"train": {"kind": "static", "value": False}}
    call = [
        SetupField("self", None, None, "positional"),
        SetupField("x", 'Float[Array, "b 5"]', None, "positional"),
        SetupField("train", "bool", "False", "positional"),
    ]
    with_call = propose(found["MLP"], call_fields=call, name="mlp")
    assert isinstance(with_call, NeedsInput)
    assert with_call.proposal["inputs"] == {"args": [{"kind": "array", "shape": ["b", 5]}], "kwargs": {"train": False}}
    assert [m["path"] for m in with_call.missing] == ["profiles.mlp.init.kwargs.features", "profiles.mlp.dims.b"]


def test_nnx_rngs_and_equinox_key_are_left_to_the_worker(found: dict[str, Entrypoint]) -> None:
    block = propose(found["Block"], call_fields=[SetupField("x", 'Float[Array, "2 4"]', None, "positional")])
    assert isinstance(block, NeedsInput)
    assert block.proposal["init"] == {"args": [{"kind": "array"}], "kwargs": {"dout": 4}}
    assert [m["path"] for m in block.missing] == ["profiles.Block.init.args[0]"]
    done = apply_answers(block, {"profiles.Block.init.args[0]": 3})
    assert isinstance(done, Resolved)
    assert done.profile["init"] == {
        "args": [{"kind": "static", "value": 3}],
        "kwargs": {"dout": {"kind": "static", "value": 4}},
    }
    head = propose(found["Head"], call_fields=[])
    assert isinstance(head, NeedsInput)
    assert head.proposal["init"] == {"args": [{"kind": "array"}]}  # size only; key is the worker's
    assert head.proposal["inputs"] == {}


def test_64_bit_annotations_turn_x64_on_and_key_annotations_give_keys(found: dict[str, Entrypoint]) -> None:
    result = propose(found["wide"])
    assert isinstance(result, Resolved)
    assert result.profile["x64"] is True
    assert result.profile["inputs"]["args"] == [
        {"kind": "array", "shape": [2], "dtype": "float64", "generator": {"kind": "normal", "seed": 0}},
        {"kind": "key", "seed": 0},
    ]


def test_base_and_names(found: dict[str, Entrypoint], tmp_path: Path) -> None:
    result = propose(found["known"], base=tmp_path.parent, taken={"known"})
    assert result.name == "known_2"
    assert isinstance(result, Resolved)
    assert result.table["target"] == f"{tmp_path.name}/main.py::known"


def test_select_profile_proposes_from_the_entrypoint(found: dict[str, Entrypoint], tmp_path: Path) -> None:
    recipe = parse_recipe('version = 1\n[profiles.x]\ntarget = "main.py::named"\n', tmp_path / "jaxlsp.toml")
    result = select_profile(recipe, tmp_path / "main.py", "known", entrypoint=found["known"])
    assert isinstance(result, Resolved) and result.table["target"] == "main.py::known"


def test_answers_to_unknown_or_malformed_paths(found: dict[str, Entrypoint]) -> None:
    result = propose(found["named"])
    assert isinstance(result, NeedsInput)
    with pytest.raises(RecipeError, match=r"profiles\.other\.dims\.x: not asked for"):
        apply_answers(result, {"profiles.other.dims.x": 1})
    with pytest.raises(RecipeError, match=r"profiles\.named\.dims\.seq: expected a positive integer, got -1"):
        apply_answers(result, {"profiles.named.dims.seq": -1})


def _entry(kind: str, *fields: SetupField) -> Entrypoint:
    span = Span(0, 0, 0, 1)
    return Entrypoint(Path("/w/m.py"), "T", kind, span, span, (), fields, "test")  # type: ignore[arg-type]


def test_variadic_and_expression_dims_ask_for_the_shape() -> None:
    result = propose(
        _entry(
            "function",
            SetupField("a", 'Float[Array, "... 3"]', None, "positional"),
            SetupField("b", 'Float[Array, "*batch 3"]', None, "positional"),
            SetupField("c", 'Float[Array, "n+1"]', None, "positional"),
            SetupField("d", 'Float[Array, "_ #n _m 0"]', None, "keyword_only"),
        )
    )
    assert isinstance(result, NeedsInput)
    assert [(m["path"], m["message"]) for m in result.missing] == [
        (
            "profiles.T.inputs.args[0].shape",
            "the shape of a ('...' stands for any number of dimensions): a list of positive integers and dimension names",
        ),
        (
            "profiles.T.inputs.args[1].shape",
            "the shape of b ('*batch' stands for any number of dimensions): a list of positive integers and "
            "dimension names",
        ),
        (
            "profiles.T.inputs.args[2].shape",
            "the shape of c (the dimension 'n+1' is an expression): a list of positive integers and dimension names",
        ),
        (
            "profiles.T.inputs.kwargs.d.shape",
            "the shape of d (a dimension of size 0): a list of positive integers and dimension names",
        ),
    ]


@pytest.mark.parametrize(
    ("param", "annotation", "expected"),
    [
        ("x", 'Float[Array, "b 3"]', ArrayGuess("float32", ["b", 3])),
        ("x", 'jaxtyping.Int[jax.Array, "batch seq"]', ArrayGuess("int32", ["batch", "seq"])),
        ("x", "Bool[Array, '']", ArrayGuess("bool", [])),
        ("x", 'Shaped[np.ndarray, "2 _ #c _d"]', ArrayGuess("float32", [2, "x_1", "c", "d"])),
        ("x", 'Float16[Array, "1"]', ArrayGuess("float16", [1])),
        ("x", 'BFloat16[Array, "1"]', ArrayGuess("bfloat16", [1])),
        ("x", 'Int8[Array, "1"]', ArrayGuess("int8", [1])),
        ("x", 'UInt8[Array, "1"]', ArrayGuess("uint8", [1])),
        ("x", 'Complex64[Array, "1"]', ArrayGuess("complex64", [1])),
        ("x", 'Int64[Array, "1"]', ArrayGuess("int64", [1])),
        ("x", 'Optional[Float[Array, "2"]]', ArrayGuess("float32", [2])),
        ("x", 'Float[Array, "2"] | None', ArrayGuess("float32", [2])),
        ("x", "jax.Array", ArrayGuess("float32", None, "jax.Array carries no shape")),
        ("x", "jnp.ndarray", ArrayGuess("float32", None, "jnp.ndarray carries no shape")),
        ("key", "jax.Array", KeyGuess()),
        ("k", 'Key[Array, ""]', KeyGuess()),
        ("k", "PRNGKeyArray", KeyGuess()),
        ("rng", None, KeyGuess()),
        ("r", "nnx.Rngs", RngsGuess()),
        ("n", "int", StaticGuess("int")),
        ("s", "'str'", StaticGuess("str")),
        ("c", "Config", UnknownGuess()),
        ("c", 'UInt32[Array, "2"]', ArrayGuess("uint32", [2])),
        ("c", 'Complex128[Array, "2"]', ArrayGuess("complex128", [2])),
        ("c", None, UnknownGuess()),
    ],
)
def test_annotations(param: str, annotation: str | None, expected: Any) -> None:
    assert guess(param, annotation) == expected


def test_an_nnx_rngs_parameter_by_another_name_gets_a_ref() -> None:
    result = propose(_entry("nnx", SetupField("rng", "nnx.Rngs", None, "keyword_only")), call_fields=[])
    assert isinstance(result, Resolved)
    assert result.profile["init"]["kwargs"] == {
        "rng": {"kind": "ref", "ref": "flax.nnx:Rngs", "args": [{"kind": "static", "value": 0}]}
    }
