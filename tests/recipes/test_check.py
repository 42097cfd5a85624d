"""jaxlsp.toml: every key, input spec, generator, dtype, limit and error, with lines and key paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jaxlsp.recipes import (
    MAX_ARRAYS,
    MAX_ELEMENTS,
    NeedsInput,
    RecipeError,
    Resolved,
    apply_answers,
    load_recipe,
    parse_recipe,
    select_profile,
)
from jaxlsp.recipes.schema import DTYPES
from tests.recipes.test_helpers import HEADER, inputs, load, needs, problems, profile, write

CHOICES = '"cpu", "cuda:N", "tpu" or "tpu:N"'

# -- a whole profile ----------------------------------------------------------------------------


def test_a_full_profile_resolves_into_the_protocol_shapes(tmp_path: Path) -> None:
    result = profile(
        tmp_path,
        """\
        kind = "linen"
        device = "cuda:1"
        seed = 7
        x64 = true
        python = ".venv/bin/python"
        transform = "value_and_grad"
        rngs = ["dropout"]
        mutable = ["batch_stats"]
        method = "encode"
        load = "definitions"
        dims = { batch = 8 }
        symbolic = ["seq"]
        init = { kwargs = { features = 4, cfg = { ref = "models:Config", kwargs = { width = 2 } } } }

        [profiles.p.inputs]
        args = [{ kind = "array", shape = ["batch", "seq", 3], dtype = "float64" }]
        kwargs = { train = false, key = { kind = "key" }, mask = { kind = "none" } }
        """,
    )
    assert result == {
        "name": "p",
        "device": "cuda:1",
        "seed": 7,
        "x64": True,
        "init": {
            "args": [],
            "kwargs": {
                "features": {"kind": "static", "value": 4},
                "cfg": {"kind": "ref", "ref": "models:Config", "kwargs": {"width": {"kind": "static", "value": 2}}},
            },
        },
        "inputs": {
            "args": [
                {
                    "kind": "array",
                    "shape": [8, "seq", 3],
                    "dtype": "float64",
                    "generator": {"kind": "normal", "seed": 7},
                }
            ],
            "kwargs": {
                "train": {"kind": "static", "value": False},
                "key": {"kind": "key", "seed": 7},
                "mask": {"kind": "none"},
            },
        },
        "transform": "value_and_grad",
        "rngs": ["dropout"],
        "mutable": ["batch_stats"],
        "method": "encode",
        "load": "definitions",
        "symbolic": ["seq"],
    }


def test_defaults(tmp_path: Path) -> None:
    recipe = load(tmp_path, HEADER)
    result = select_profile(recipe, tmp_path / "model.py", "f")
    assert isinstance(result, Resolved)
    assert result.profile == {
        "name": "p",
        "device": "cpu",
        "seed": 0,
        "x64": False,
        "inputs": {"args": [], "kwargs": {}},
        "load": "module",
    }
    assert result.target == {"path": str(tmp_path / "model.py"), "name": "f"}
    assert result.python is None
    assert result.recipe == tmp_path / "jaxlsp.toml"


def test_target_kind_and_python(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text("class MLP: pass\n")
    recipe = load(
        tmp_path,
        """\
        version = 1
        [profiles.a]
        target = "sub/m.py::MLP"
        kind = "nnx"
        python = "python3.12"
        [profiles.b]
        target = "./sub/../sub/m.py::MLP.encode"
        python = "~/venv/bin/python"
        """,
    )
    a = select_profile(recipe, tmp_path / "sub" / "m.py", None, "a")
    b = select_profile(recipe, tmp_path / "sub" / "m.py", None, "b")
    assert isinstance(a, Resolved) and isinstance(b, Resolved)
    assert a.target == {"path": str(tmp_path / "sub" / "m.py"), "name": "MLP", "kind": "nnx"}
    assert a.python == "python3.12"
    assert b.target == {"path": str(tmp_path / "sub" / "m.py"), "name": "MLP.encode"}
    assert b.python == os.path.expanduser("~/venv/bin/python")


@pytest.mark.parametrize("kind", ["function", "linen", "nnx", "equinox"])
def test_every_kind(tmp_path: Path, kind: str) -> None:
    recipe = load(tmp_path, HEADER + f'kind = "{kind}"\n')
    result = recipe.results["p"]
    assert isinstance(result, Resolved) and result.target["kind"] == kind


@pytest.mark.parametrize("device", ["cpu", "cuda:0", "cuda:12", "tpu", "tpu:0", "tpu:3"])
def test_devices(tmp_path: Path, device: str) -> None:
    assert profile(tmp_path, f'device = "{device}"\n')["device"] == device


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("transform", '"grad"', "grad"),
        ("transform", '"value_and_grad"', "value_and_grad"),
        ("load", '"module"', "module"),
        ("load", '"definitions"', "definitions"),
        ("seed", "4294967295", 4294967295),
        ("x64", "true", True),
        ("method", '"decode"', "decode"),
    ],
)
def test_plain_keys(tmp_path: Path, key: str, value: str, expected: object) -> None:
    assert profile(tmp_path, f"{key} = {value}\n")[key] == expected


def test_factories(tmp_path: Path) -> None:
    result = profile(
        tmp_path,
        """\
        init = { factory = "models:make_model" }
        inputs = { factory = "models.data:make_inputs" }
        """,
    )
    assert result["init"] == {"factory": "models:make_model"}
    assert result["inputs"] == {"factory": "models.data:make_inputs"}


# -- input specs --------------------------------------------------------------------------------


def test_static_values_pytrees_refs_keys_and_none(tmp_path: Path) -> None:
    specs = inputs(
        tmp_path,
        """\
        seed = 5
        [profiles.p.inputs]
        args = [
            1, 2.5, true, "relu",
            [1, { kind = "none" }],
            { a = 1, b = { c = "x" } },
            { ref = "modules:AttentionType.GLOBAL" },
            { ref = "models:Config", args = [3], kwargs = { emb_dim = 16 } },
            { kind = "key" },
            { kind = "key", seed = 9 },
        ]
        """,
    )
    assert specs == [
        {"kind": "static", "value": 1},
        {"kind": "static", "value": 2.5},
        {"kind": "static", "value": True},
        {"kind": "static", "value": "relu"},
        {"kind": "list", "items": [{"kind": "static", "value": 1}, {"kind": "none"}]},
        {
            "kind": "dict",
            "items": {
                "a": {"kind": "static", "value": 1},
                "b": {"kind": "dict", "items": {"c": {"kind": "static", "value": "x"}}},
            },
        },
        {"kind": "ref", "ref": "modules:AttentionType.GLOBAL"},
        {
            "kind": "ref",
            "ref": "models:Config",
            "args": [{"kind": "static", "value": 3}],
            "kwargs": {"emb_dim": {"kind": "static", "value": 16}},
        },
        {"kind": "key", "seed": 5},
        {"kind": "key", "seed": 9},
    ]


def test_legacy_and_other_keys(tmp_path: Path) -> None:
    """A raw uint32[2] key (``jax.random.PRNGKey``) is written ``legacy = true`` or as a uint32 array;
    a typed key may name its implementation."""
    specs = inputs(
        tmp_path,
        """\
        inputs.args = [
            { kind = "key", legacy = true },
            { kind = "key", seed = 3, impl = "rbg" },
            { kind = "array", shape = [2], dtype = "uint32", generator = { kind = "randint", low = 0, high = 4294967296 } },
        ]
        """,
    )
    assert specs == [
        {"kind": "key", "seed": 0, "legacy": True},
        {"kind": "key", "seed": 3, "impl": "rbg"},
        {
            "kind": "array",
            "shape": [2],
            "dtype": "uint32",
            "generator": {"kind": "randint", "low": 0, "high": 4294967296, "seed": 0},
        },
    ]


def test_wide_unsigned_and_complex_need_x64(tmp_path: Path) -> None:
    for dtype in ("uint64", "complex128"):
        found = problems(tmp_path, HEADER + f'inputs.args = [{{ kind = "array", shape = [2], dtype = "{dtype}" }}]\n')
        assert found == [
            f"5: profiles.p.inputs.args[0].dtype: {dtype} needs x64 = true in this profile (64-bit values are "
            "refused, never narrowed)"
        ]


def test_devices_and_a_function_targets_init_factory(tmp_path: Path) -> None:
    result = profile(tmp_path, 'devices = 4\nkind = "function"\ninit = { factory = "configs:make_f" }\n')
    assert result["devices"] == 4
    assert result["init"] == {"factory": "configs:make_f"}
    assert "devices" not in profile(tmp_path, "seed = 1\n")


def test_array_defaults(tmp_path: Path) -> None:
    (spec,) = inputs(tmp_path, 'inputs.args = [{ kind = "array", shape = [2, 3] }]\n')
    assert spec == {"kind": "array", "shape": [2, 3], "dtype": "float32", "generator": {"kind": "normal", "seed": 0}}
    (scalar,) = inputs(tmp_path, 'inputs.args = [{ kind = "array", shape = [] }]\n')
    assert scalar["shape"] == []


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_its_default_generator(tmp_path: Path, dtype: str) -> None:
    wide = dtype in ("float64", "int64", "uint64", "complex128")
    body = (
        "x64 = true\n" if wide else ""
    ) + f'seed = 2\ninputs.args = [{{ kind = "array", shape = [4], dtype = "{dtype}" }}]\n'
    (spec,) = inputs(tmp_path, body)
    assert spec["dtype"] == dtype
    floating = dtype.startswith(("float", "bfloat", "complex"))
    assert spec["generator"] == ({"kind": "normal", "seed": 2} if floating else {"kind": "zeros"})


def test_an_unknown_dtype_lists_the_allowed_ones(tmp_path: Path) -> None:
    assert problems(tmp_path, HEADER + 'inputs.args = [{ kind = "array", shape = [4], dtype = "float128" }]\n') == [
        '5: profiles.p.inputs.args[0].dtype: unsupported dtype "float128" (allowed: float16, bfloat16, float32, '
        "float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool, complex64, complex128)"
    ]


@pytest.mark.parametrize(
    ("dtype", "generator", "expected"),
    [
        ("float32", '{ kind = "full", value = 1.5 }', {"kind": "full", "value": 1.5}),
        ("int8", '{ kind = "full", value = -128 }', {"kind": "full", "value": -128}),
        ("bool", '{ kind = "full", value = true }', {"kind": "full", "value": True}),
        ("float32", '{ kind = "zeros" }', {"kind": "zeros"}),
        ("int32", '{ kind = "ones" }', {"kind": "ones"}),
        ("float32", '{ kind = "normal" }', {"kind": "normal", "seed": 3}),
        (
            "complex64",
            '{ kind = "normal", seed = 1, mean = 0.5, std = 2 }',
            {"kind": "normal", "seed": 1, "mean": 0.5, "std": 2},
        ),
        ("bfloat16", '{ kind = "uniform" }', {"kind": "uniform", "seed": 3}),
        (
            "float16",
            '{ kind = "uniform", seed = 4, low = -1, high = 1.5 }',
            {"kind": "uniform", "seed": 4, "low": -1, "high": 1.5},
        ),
        ("int32", '{ kind = "arange" }', {"kind": "arange"}),
        ("float32", '{ kind = "arange", start = 1, step = 0.5 }', {"kind": "arange", "start": 1, "step": 0.5}),
        ("int32", '{ kind = "randint", low = 0, high = 10 }', {"kind": "randint", "low": 0, "high": 10, "seed": 3}),
        (
            "uint8",
            '{ kind = "randint", low = 0, high = 256, seed = 0 }',
            {"kind": "randint", "low": 0, "high": 256, "seed": 0},
        ),
    ],
)
def test_every_generator(tmp_path: Path, dtype: str, generator: str, expected: dict[str, object]) -> None:
    body = f'seed = 3\ninputs.args = [{{ kind = "array", shape = [2], dtype = "{dtype}", generator = {generator} }}]\n'
    (spec,) = inputs(tmp_path, body)
    assert spec["generator"] == expected


@pytest.mark.parametrize(
    ("spec", "key", "message"),
    [
        (
            '{ kind = "array", shape = [2], generator = { kind = "gauss" } }',
            "generator.kind",
            'expected one of "full", "zeros", "ones", "normal", "uniform", "arange", "randint", got "gauss"',
        ),
        (
            '{ kind = "array", shape = [2], generator = { seed = 1 } }',
            "generator.kind",
            'missing (expected one of "full", "zeros", "ones", "normal", "uniform", "arange", "randint")',
        ),
        (
            '{ kind = "array", shape = [2], generator = "normal" }',
            "generator",
            'expected a generator table such as { kind = "normal" }, got "normal"',
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "full" } }',
            "generator.value",
            "missing (the full generator needs value)",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "int32", generator = { kind = "randint", low = 1 } }',
            "generator.high",
            "missing (the randint generator needs low and high)",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "normal", sd = 1 } }',
            "generator.sd",
            "unknown key (did you mean std?)",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "zeros", value = 1 } }',
            "generator.value",
            "unknown key (expected one of: kind)",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "int32", generator = { kind = "normal" } }',
            "generator.kind",
            "the normal generator cannot fill a int32 array (it fills float16, bfloat16, float32, float64, complex64, "
            "complex128)",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "int32", generator = { kind = "uniform" } }',
            "generator.kind",
            "the uniform generator cannot fill a int32 array (it fills float16, bfloat16, float32, float64)",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "randint", low = 0, high = 2 } }',
            "generator.kind",
            "the randint generator cannot fill a float32 array (it fills int8, int16, int32, int64, uint8, uint16, "
            "uint32, uint64)",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "bool", generator = { kind = "arange" } }',
            "generator.kind",
            "the arange generator cannot fill a bool array (it fills float16, bfloat16, float32, float64, int8, int16, "
            "int32, int64, uint8, uint16, uint32, uint64)",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "uint8", generator = { kind = "full", value = -1 } }',
            "generator.value",
            "-1 does not fit in uint8 (0 to 255)",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "int8", generator = { kind = "randint", low = 0, high = 1000 } }',
            "generator.high",
            "1000 does not fit in int8 (-128 to 128)",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "int32", generator = { kind = "full", value = 1.5 } }',
            "generator.value",
            "expected an integer for a int32 array, got 1.5",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "bool", generator = { kind = "full", value = 1 } }',
            "generator.value",
            "expected true or false for a bool array, got 1",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "full", value = true } }',
            "generator.value",
            "expected a number, got true",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "normal", mean = "0" } }',
            "generator.mean",
            'expected a number, got "0"',
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "normal", std = -1.0 } }',
            "generator.std",
            "expected a number of at least 0, got -1.0",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "normal", mean = nan } }',
            "generator.mean",
            "expected a finite number, got nan",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "uniform", low = 2 } }',
            "generator.high",
            "expected high > low, got low = 2 and high = 1",
        ),
        (
            '{ kind = "array", shape = [2], dtype = "int32", generator = { kind = "randint", low = 5, high = 5 } }',
            "generator.high",
            "expected high > low, got low = 5 and high = 5",
        ),
        (
            '{ kind = "array", shape = [2], generator = { kind = "normal", seed = -1 } }',
            "generator.seed",
            "expected an integer from 0 to 4294967295, got -1",
        ),
        ('{ kind = "array", shape = 4 }', "shape", "expected a list of positive integers and dimension names, got 4"),
        ('{ kind = "array", shape = [0] }', "shape[0]", "expected a positive integer or a dimension name, got 0"),
        (
            '{ kind = "array", shape = ["2*b"] }',
            "shape[0]",
            'expected a positive integer or a dimension name, got "2*b"',
        ),
        ('{ kind = "array", shape = [1.5] }', "shape[0]", "expected a positive integer or a dimension name, got 1.5"),
        ('{ kind = "array", shape = [1], dtyp = "int8" }', "dtyp", "unknown key (did you mean dtype?)"),
        ('{ kind = "tensor" }', "kind", 'expected one of "array", "key", "none", got "tensor"'),
        ('{ kind = "key", seed = 1.5 }', "seed", "expected an integer from 0 to 4294967295, got 1.5"),
        ('{ kind = "key", sead = 1 }', "sead", "unknown key (did you mean seed?)"),
        ('{ kind = "none", value = 1 }', "value", "unknown key (expected one of: kind)"),
        ('{ kind = "key", ref = "a:b" }', "ref", "a table has either kind or ref, not both"),
        ('{ ref = "models.Config" }', "ref", 'expected "module:Name" (dotted Python names), got "models.Config"'),
        ('{ ref = "models:Config", arg = [] }', "arg", "unknown key (did you mean args?)"),
        ('{ ref = "models:Config", args = 1 }', "args", "expected a list of input specs, got 1"),
        ('{ ref = "models:Config", kwargs = [1] }', "kwargs", "expected a table of input specs, got [1]"),
        ("inf", "", "expected a finite number, got inf"),
        ("1979-05-27", "", "expected an input spec, a scalar, a string, a list or a table, got a date (1979-05-27)"),
    ],
)
def test_spec_errors(tmp_path: Path, spec: str, key: str, message: str) -> None:
    text = HEADER + "[profiles.p.inputs]\nargs = [\n    1,\n    " + spec + ",\n]\n"
    path = "profiles.p.inputs.args[1]" + ("." + key if key and not key.startswith("[") else key)
    assert problems(tmp_path, text) == [f"8: {path}: {message}"]


def test_keyword_names_are_identifiers(tmp_path: Path) -> None:
    assert problems(tmp_path, HEADER + 'inputs.kwargs = { "not ok" = 1 }\n') == [
        '5: profiles.p.inputs.kwargs."not ok": expected a Python identifier as a keyword argument\'s name'
    ]


# -- dims, symbolic, needs input ----------------------------------------------------------------


def test_named_dims_are_resolved_and_symbolic_ones_kept(tmp_path: Path) -> None:
    (spec,) = inputs(
        tmp_path,
        """\
        dims = { batch = 32, hidden = 128 }
        symbolic = ["seq"]
        inputs.args = [{ kind = "array", shape = ["batch", "seq", "hidden", 2] }]
        """,
    )
    assert spec["shape"] == [32, "seq", 128, 2]


def test_a_missing_dimension_is_asked_for(tmp_path: Path) -> None:
    result = needs(
        tmp_path,
        """\
        dims = { hidden = 4 }
        [profiles.p.inputs]
        args = [{ kind = "array", shape = ["batch", "hidden"] }, { kind = "array", shape = ["batch", "seq"] }]
        """,
    )
    assert result.missing == [
        {
            "path": "profiles.p.dims.batch",
            "kind": "dimension",
            "name": "batch",
            "usedAt": ["profiles.p.inputs.args[0].shape[0]", "profiles.p.inputs.args[1].shape[0]"],
            "message": "the size of dimension batch (a positive integer), used at "
            "profiles.p.inputs.args[0].shape[0], profiles.p.inputs.args[1].shape[0]",
        },
        {
            "path": "profiles.p.dims.seq",
            "kind": "dimension",
            "name": "seq",
            "usedAt": ["profiles.p.inputs.args[1].shape[1]"],
            "message": "the size of dimension seq (a positive integer), used at profiles.p.inputs.args[1].shape[1]",
        },
    ]
    assert result.recipe == tmp_path / "jaxlsp.toml"
    done = apply_answers(result, {"profiles.p.dims.batch": 2, "profiles.p.dims.seq": 5})
    assert isinstance(done, Resolved)
    assert done.profile["name"] == "p"
    assert [a["shape"] for a in done.profile["inputs"]["args"]] == [[2, 4], [2, 5]]
    assert done.table["dims"] == {"hidden": 4, "batch": 2, "seq": 5}


def test_answers_are_checked(tmp_path: Path) -> None:
    result = needs(tmp_path, 'inputs.args = [{ kind = "array", shape = ["b"] }]\n')
    with pytest.raises(RecipeError) as info:
        apply_answers(result, {"profiles.p.dims.b": 0})
    assert str(info.value) == f"{tmp_path / 'jaxlsp.toml'}: profiles.p.dims.b: expected a positive integer, got 0"
    with pytest.raises(RecipeError) as info:
        apply_answers(result, {"profiles.p.dims.c": 1})
    assert info.value.problems[0].message == "not asked for (asked: profiles.p.dims.b)"
    partial = apply_answers(result, {})
    assert isinstance(partial, NeedsInput) and partial.missing == result.missing


def test_a_missing_shape_is_asked_for(tmp_path: Path) -> None:
    result = needs(tmp_path, 'inputs.kwargs = { x = { kind = "array", dtype = "int8" } }\n')
    assert result.missing == [
        {
            "path": "profiles.p.inputs.kwargs.x.shape",
            "kind": "shape",
            "message": "the shape of this array (a list of positive integers and dimension names)",
        }
    ]
    done = apply_answers(result, {"profiles.p.inputs.kwargs.x.shape": [3]})
    assert isinstance(done, Resolved)
    assert done.profile["inputs"]["kwargs"]["x"]["shape"] == [3]


# -- limits and x64 -----------------------------------------------------------------------------


def test_limits_hold_at_the_edge(tmp_path: Path) -> None:
    specs = ", ".join(['{ kind = "array", shape = [2] }'] * (MAX_ARRAYS - 1))
    body = f'inputs.args = [{specs}, {{ kind = "array", shape = [{MAX_ELEMENTS - 2 * (MAX_ARRAYS - 1)}] }}]\n'
    assert len(inputs(tmp_path, body)) == MAX_ARRAYS


def test_too_many_arrays(tmp_path: Path) -> None:
    specs = ",\n".join(['{ kind = "array", shape = [1] }'] * (MAX_ARRAYS + 1))
    assert problems(tmp_path, HEADER + f"[profiles.p.inputs]\nargs = [\n{specs}\n]\n") == [
        f"{7 + MAX_ARRAYS}: profiles.p.inputs.args[256]: 257 arrays in this profile, over the limit of 256 "
        "(checked before anything runs)"
    ]


def test_too_many_elements_names_the_largest_array(tmp_path: Path) -> None:
    text = HEADER + (
        "dims = { b = 2048 }\n"
        "[profiles.p.init]\n"
        'kwargs = { w = { kind = "array", shape = [4, 4] } }\n'
        "[profiles.p.inputs]\n"
        'args = [{ kind = "array", shape = ["b", 2048] }]\n'
    )
    assert problems(tmp_path, text) == [
        "9: profiles.p.inputs.args[0]: 4,194,320 array elements in this profile, over the limit of 4,194,304 "
        "(checked before anything runs); the largest array is this one, shape [2048, 2048] = 4,194,304 elements"
    ]


def test_symbolic_dims_count_as_one_and_missing_ones_as_at_least_one(tmp_path: Path) -> None:
    ok = inputs(tmp_path, f'symbolic = ["n"]\ninputs.args = [{{ kind = "array", shape = ["n", {MAX_ELEMENTS}] }}]\n')
    assert ok[0]["shape"] == ["n", MAX_ELEMENTS]
    text = HEADER + f'inputs.args = [{{ kind = "array", shape = ["n", {MAX_ELEMENTS + 1}] }}]\n'
    (line,) = problems(tmp_path, text)
    assert line.startswith(
        "5: profiles.p.inputs.args[0]: 4,194,305 array elements in this profile (at least: unknown dimensions "
        "counted as 1), over the limit"
    )


def test_limits_count_arrays_inside_refs_and_pytrees(tmp_path: Path) -> None:
    text = HEADER + (
        "[profiles.p.inputs]\n"
        f'args = [{{ ref = "m:f", args = [{{ a = {{ kind = "array", shape = [{MAX_ELEMENTS}] }} }}] }},'
        ' [{ kind = "array", shape = [1] }]]\n'
    )
    (line,) = problems(tmp_path, text)
    assert line.startswith("6: profiles.p.inputs.args[0].args[0].a: 4,194,305 array elements")


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_64_bit_needs_x64(tmp_path: Path, dtype: str) -> None:
    text = HEADER + f'[profiles.p.inputs]\nargs = [\n    {{ kind = "array", shape = [2], dtype = "{dtype}" }},\n]\n'
    assert problems(tmp_path, text) == [
        f"7: profiles.p.inputs.args[0].dtype: {dtype} needs x64 = true in this profile "
        "(64-bit values are refused, never narrowed)"
    ]
    (spec,) = inputs(tmp_path, f'x64 = true\ninputs.args = [{{ kind = "array", shape = [2], dtype = "{dtype}" }}]\n')
    assert spec["dtype"] == dtype


# -- profile key errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('devce = "cpu"', "profiles.p.devce: unknown key (did you mean device?)"),
        (
            "zzz = 1",
            "profiles.p.zzz: unknown key (expected one of: target, kind, device, seed, x64, python, init, "
            "inputs, transform, rngs, mutable, method, load, dims, symbolic, devices, mesh, topology, env, from)",
        ),
        ('kind = "torch"', 'profiles.p.kind: expected one of "function", "linen", "nnx", "equinox", got "torch"'),
        ('device = "gpu"', f'profiles.p.device: expected {CHOICES} (N a device number), got "gpu"'),
        ('device = "cuda:01"', f'profiles.p.device: expected {CHOICES} (N a device number), got "cuda:01"'),
        ('device = "tpu:01"', f'profiles.p.device: expected {CHOICES} (N a device number), got "tpu:01"'),
        ('device = "tpu0"', f'profiles.p.device: expected {CHOICES} (N a device number), got "tpu0"'),
        ("seed = -3", "profiles.p.seed: expected an integer from 0 to 4294967295, got -3"),
        ("seed = true", "profiles.p.seed: expected an integer from 0 to 4294967295, got true"),
        ("seed = 4294967296", "profiles.p.seed: expected an integer from 0 to 4294967295, got 4294967296"),
        ('x64 = "yes"', 'profiles.p.x64: expected true or false, got "yes"'),
        ('python = ""', 'profiles.p.python: expected the path of a Python interpreter, got ""'),
        ('transform = "jvp"', 'profiles.p.transform: expected one of "grad", "value_and_grad", got "jvp"'),
        ('load = "script"', 'profiles.p.load: expected one of "module", "definitions", "cells", got "script"'),
        ('method = "not a name"', 'profiles.p.method: expected a method name, got "not a name"'),
        ('rngs = "dropout"', 'profiles.p.rngs: expected a list of rng stream names, got "dropout"'),
        ('rngs = ["dropout", "dropout"]', 'profiles.p.rngs[1]: "dropout" is listed twice'),
        ("mutable = [1]", "profiles.p.mutable[0]: expected a name (letters, digits, _), got 1"),
        ('symbolic = ["2b"]', 'profiles.p.symbolic[0]: expected a name (letters, digits, _), got "2b"'),
        ("dims = { b = 0 }", "profiles.p.dims.b: expected a positive integer, got 0"),
        ('dims = { b = "8" }', 'profiles.p.dims.b: expected a positive integer, got "8"'),
        ('dims = { "a b" = 8 }', 'profiles.p.dims."a b": expected a dimension name (letters, digits, _)'),
        ("dims = [1]", "profiles.p.dims: expected a table of dimension sizes (name = positive integer), got [1]"),
        (
            'symbolic = ["b"]\ndims = { b = 4 }',
            "profiles.p.dims.b: b is listed in symbolic, so it has no size; drop one of them",
        ),
        ("inputs = [1]", "profiles.p.inputs: expected a table with args and kwargs, or factory, got [1]"),
        ("inputs = { arg = [] }", "profiles.p.inputs.arg: unknown key (did you mean args?)"),
        ("inputs.args = { a = 1 }", "profiles.p.inputs.args: expected a list of input specs, got { a = 1 }"),
        (
            'inputs = { factory = "make" }',
            'profiles.p.inputs.factory: expected "module:function" (dotted Python names), got "make"',
        ),
        (
            'inputs = { factory = "m:make", args = [] }',
            "profiles.p.inputs.args: a factory is called with no arguments; drop args/kwargs or the factory",
        ),
        (
            'kind = "function"\ninit = { args = [] }',
            'profiles.p.init: init arguments are for module targets, and kind = "function"; a function target '
            'takes init = { factory = "module:function" }, a function returning the callable to trace',
        ),
        (
            "requires_grad = true",
            "profiles.p.requires_grad: unknown key (did you mean transform? gradients are asked with "
            'transform = "grad" or "value_and_grad")',
        ),
        ("devices = 0", "profiles.p.devices: expected a number of devices from 1 to 256, got 0"),
        (
            'device = "cuda:0"\ndevices = 2',
            'profiles.p.devices: devices = 2 makes virtual CPU devices, and device = "cuda:0"; use device = "cpu" '
            "(the default) or drop devices",
        ),
        (
            'inputs.args = [{ kind = "key", impl = "philox" }]',
            'profiles.p.inputs.args[0].impl: expected one of "threefry2x32", "rbg", "unsafe_rbg", got "philox"',
        ),
        (
            'inputs.args = [{ kind = "key", impl = "rbg", legacy = true }]',
            "profiles.p.inputs.args[0].impl: a legacy key is a raw uint32[2] threefry key; drop impl or legacy",
        ),
        ('kind = "function"\nmethod = "m"', 'profiles.p.method: method is for module targets, and kind = "function"'),
        ('kind = "nnx"\nrngs = ["dropout"]', 'profiles.p.rngs: rngs is for Linen modules, and kind = "nnx"'),
        (
            'kind = "equinox"\nmutable = ["stats"]',
            'profiles.p.mutable: mutable is for Linen modules, and kind = "equinox"',
        ),
    ],
)
def test_profile_key_errors(tmp_path: Path, body: str, expected: str) -> None:
    found = problems(tmp_path, HEADER + body + "\n")
    assert found == [f"{4 + body.count(chr(10)) + 1}: {expected}"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ('"model.py"', 'expected "path/to/file.py::Name" (Name may be Class.method), got "model.py"'),
        ('"::f"', 'expected "path/to/file.py::Name" (Name may be Class.method), got "::f"'),
        ('"model.py::f-g"', 'expected "path/to/file.py::Name" (Name may be Class.method), got "model.py::f-g"'),
        ("3", 'expected "path/to/file.py::Name" (Name may be Class.method), got 3'),
    ],
)
def test_bad_targets(tmp_path: Path, target: str, message: str) -> None:
    assert problems(tmp_path, f"version = 1\n[profiles.p]\ntarget = {target}\n") == [f"3: profiles.p.target: {message}"]


def test_a_missing_target_points_at_the_table(tmp_path: Path) -> None:
    assert problems(tmp_path, "version = 1\n\n[profiles.p]\nseed = 1\n") == [
        '3: profiles.p.target: missing (expected "path/to/file.py::Name", relative to the recipe\'s folder)'
    ]


def test_class_method_target_and_method_key_conflict(tmp_path: Path) -> None:
    text = 'version = 1\n[profiles.p]\ntarget = "model.py::MLP.encode"\nmethod = "decode"\n'
    assert problems(tmp_path, text) == [
        "4: profiles.p.method: the target already names a method (MLP.encode); drop method or name the class"
    ]
    nested = load(tmp_path, 'version = 1\n[profiles.p]\ntarget = "model.py::Outer.Inner"\nmethod = "decode"\n')
    result = nested.results["p"]
    assert isinstance(result, Resolved) and result.profile["method"] == "decode"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[profiles.p]\ntarget = "m.py::f"\n', ["1: version: missing (write version = 1 at the top)"]),
        ("version = 2\n", ["1: version: expected 1, got 2"]),
        ("version = true\n", ["1: version: expected 1, got true"]),
        ("version = 1\nprofile = {}\n", ["2: profile: unknown key (did you mean profiles?)"]),
        ("version = 1\nprofiles = 3\n", ["2: profiles: expected [profiles.NAME] tables, got 3"]),
        ("version = 1\nprofiles.p = 3\n", ["2: profiles.p: expected a table [profiles.p], got 3"]),
    ],
)
def test_top_level_errors(tmp_path: Path, text: str, expected: list[str]) -> None:
    found = problems(tmp_path, text)
    assert found[: len(expected)] == expected


def test_every_problem_is_reported_at_once_in_line_order(tmp_path: Path) -> None:
    text = """\
        version = 1

        [profiles.mlp]
        target = "model.py::MLP"
        devce = "cpu"
        seed = -1

        [profiles.mlp.inputs]
        args = [
            { kind = "array", shape = [8, -3] },
            { kind = "array", shape = [8], dtype = "float64" },
        ]

        [profiles.other]
        target = "model.py"
        """
    path = write(tmp_path, text)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value).splitlines() == [
        f"{path}:5: profiles.mlp.devce: unknown key (did you mean device?)",
        f"{path}:6: profiles.mlp.seed: expected an integer from 0 to 4294967295, got -1",
        f"{path}:10: profiles.mlp.inputs.args[0].shape[1]: expected a positive integer or a dimension name, got -3",
        f"{path}:11: profiles.mlp.inputs.args[1].dtype: float64 needs x64 = true in this profile "
        "(64-bit values are refused, never narrowed)",
        f'{path}:15: profiles.other.target: expected "path/to/file.py::Name" (Name may be Class.method), got "model.py"',
    ]
    assert info.value.problems[0].to_json() == {
        "path": str(path),
        "line": 5,
        "keyPath": "profiles.mlp.devce",
        "message": "unknown key (did you mean device?)",
    }


def test_invalid_toml_reports_its_line(tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as info:
        parse_recipe("version = 1\n[profiles.p]\ntarget = \n", tmp_path / "jaxlsp.toml")
    (problem,) = info.value.problems
    assert problem.line == 3 and problem.message.startswith("not valid TOML: ")


def test_an_unreadable_recipe(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="cannot read the recipe"):
        load_recipe(tmp_path / "missing.toml")


def test_arrays_of_tables_are_located(tmp_path: Path) -> None:
    text = HEADER + (
        "[[profiles.p.inputs.args]]\n"
        'kind = "array"\n'
        "shape = [2]\n"
        "[[profiles.p.inputs.args]]\n"
        'kind = "array"\n'
        'shape = [2, "b", 0]\n'
    )
    assert problems(tmp_path, text) == [
        "10: profiles.p.inputs.args[1].shape[2]: expected a positive integer or a dimension name, got 0"
    ]
