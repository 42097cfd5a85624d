"""Recipes the TOML parsers choke on (issue 25, item 7): an integer of 5,000 digits (Python 3.11
refuses to convert more than 4,300: a ValueError, then an internal error, even before trust), an
integer wider than 64 bits anywhere, and a dotted key of 20,000 parts (tomllib spent 8.4 s on it,
locate 4.6 s more). Each is one recipe error ``jaxlsp.toml:LINE: key.path: message``, found before
tomllib (or tomlkit) spends time on it; a dot inside a string or a comment is not a key's."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlsp.recipes import RecipeError, load_recipe, parse_recipe
from jaxlsp.recipes.answers import parse_answers
from jaxlsp.recipes.bounds import MAX_KEY_PARTS, check_text
from jaxlsp.recipes.save import SaveError, _set_answers

PATH = Path("/w/jaxlsp.toml")
HEAD = 'version = 1\n\n[profiles.p]\ntarget = "model.py::f"\n'
DIGITS = "9" * 5000


def problem(text: str) -> str:
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, PATH)
    assert len(info.value.problems) == 1, info.value
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEAD + f"seed = {DIGITS}\n", "/w/jaxlsp.toml:5: profiles.p.seed: not accepted: an integer of more than 4,300"),
        (f"version = {DIGITS}\n", "/w/jaxlsp.toml:1: version: not accepted: an integer of more than 4,300"),
        (HEAD + f"[profiles.p.dims]\nbatch = {DIGITS}\n", "/w/jaxlsp.toml:6: profiles.p.dims.batch: not accepted"),
        (
            HEAD + f'inputs.args = [{{ kind = "array", shape = [2], dtype = "int32", '
            f'generator = {{ kind = "full", value = {"9" * 4000} }} }}]\n',
            "/w/jaxlsp.toml:5: profiles.p.inputs.args[0].generator.value: not accepted: an integer of 13,288 bits",
        ),
        (HEAD + f"seed = {2**64}\n", "/w/jaxlsp.toml:5: profiles.p.seed: not accepted: an integer of 65 bits"),
        (
            HEAD + f"seed = 0x{'f' * 20000}\n",
            "/w/jaxlsp.toml:5: profiles.p.seed: not accepted: an integer of 80,000 bits",
        ),
    ],
)
def test_integers_beyond_64_bits_are_recipe_errors_at_their_key(text: str, expected: str) -> None:
    said = problem(text)
    assert said.startswith(expected), said
    assert len(said) < 300, said  # the integer itself is never quoted back


def test_a_64_bit_integer_is_still_checked_by_its_key() -> None:
    said = problem(HEAD + f"seed = {2**64 - 1}\n")
    assert "profiles.p.seed: expected an integer from 0 to 4294967295" in said, said


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (HEAD + "a" + ".a" * 20_000 + " = 1\n", 5),  # a dotted key
        ("version = 1\n[" + "a" + ".a" * 20_000 + "]\n", 2),  # a table header
        (HEAD + "inputs = { " + ".".join(['"q"'] * 20_000) + " = 1 }\n", 5),  # quoted parts, in an inline table
        (HEAD + "x" + " . x" * MAX_KEY_PARTS + " = 1\n", 5),  # spaces around the dots: one part over
    ],
)
def test_a_dotted_key_of_too_many_parts_is_refused_before_tomllib(text: str, line: int) -> None:
    said = problem(text)
    assert said.startswith(f"/w/jaxlsp.toml:{line}: "), said
    assert "not accepted: a dotted key of" in said and f"(at most {MAX_KEY_PARTS})" in said, said
    assert len(said) < 300, said


@pytest.mark.parametrize(
    "text",
    [
        HEAD + 'python = "' + "a." * 20_000 + '"\n',  # dots in a string
        HEAD + "# " + "a." * 20_000 + "\n",  # in a comment
        HEAD + 'python = """\n' + "a." * 20_000 + '\n"""\n',  # in a multi-line string
        HEAD + "python = '" + "a." * 20_000 + "'\n",  # in a literal string
        HEAD + "x" + ".x" * (MAX_KEY_PARTS - 1) + " = 1\n",  # exactly the most parts
    ],
)
def test_dots_that_are_not_a_long_key_pass(text: str) -> None:
    check_text(text, PATH)


def test_saving_into_a_recipe_with_a_long_key_never_reaches_tomlkit() -> None:
    text = HEAD + "a" + ".a" * 20_000 + " = 1\n"
    with pytest.raises(SaveError, match="a dotted key of 20,001 parts"):
        _set_answers(PATH, text, "p", {"profiles.p.seed": 1})


def test_an_answer_wider_than_64_bits_is_an_answer_error() -> None:
    items = [{"path": "profiles.p.dims.batch", "kind": "dimension"}, {"path": "profiles.p.seed", "kind": "value"}]
    values, errors = parse_answers(items, {"profiles.p.dims.batch": "9" * 4000, "profiles.p.seed": 2**70})
    assert values == {}, values
    assert set(errors) == {"profiles.p.dims.batch", "profiles.p.seed"}, errors
    assert all("a recipe's integers fit 64 bits" in e and len(e) < 200 for e in errors.values()), errors


def test_a_recipe_over_128_kib_is_refused_with_its_limit(tmp_path: Path) -> None:
    # A 1 MiB recipe of valid profiles held every request of an untrusted server 2.5 s.
    profile = '[profiles.p{i}]\ntarget = "m.py::f"\ninputs.args = [{{ kind = "array", shape = [8, 16] }}]\n'
    text = "version = 1\n" + "".join(profile.format(i=i) for i in range(2000))
    assert len(text.encode()) > 128 * 1024
    (tmp_path / "jaxlsp.toml").write_text(text, encoding="utf-8")
    with pytest.raises(RecipeError, match="larger than 128 KiB"):
        load_recipe(tmp_path / "jaxlsp.toml")
