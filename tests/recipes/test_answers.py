"""Needs-input answers typed by the user, parsed once on the server by the recipe's rules
(``jaxlsp.recipes.answers``): the same text gives the same value, or the same message, whichever
editor sent it."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlsp.recipes import AnswerError, NeedsInput, Resolved, fill, parse_answer, propose_target
from jaxlsp.recipes.profile import resolve_table


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        ("dimension", "32", 32),
        ("dimension", "  7 ", 7),
        ("shape", "[8, 784]", [8, 784]),
        ("shape", "(batch, 784)", ["batch", 784]),
        ("shape", "8, 784", [8, 784]),
        ("shape", "8 784", [8, 784]),
        ("shape", '["batch", 3]', ["batch", 3]),
        ("shape", "[]", []),
        ("shape", "4", [4]),
        ("value", "3", 3),
        ("value", '"relu"', "relu"),
        ("value", "'relu'", "relu"),
        ("value", "true", True),
        ("value", '{ kind = "array", shape = [4, 3] }', {"kind": "array", "shape": [4, 3]}),
        ("value", '{"kind": "array", "shape": [4]}', {"kind": "array", "shape": [4]}),
        ("inputs", '{ args = [{ kind = "array", shape = [2, 3] }] }', {"args": [{"kind": "array", "shape": [2, 3]}]}),
        ("inputs", '{ factory = "data:batch" }', {"factory": "data:batch"}),
    ],
)
def test_each_kind_parses_what_the_docs_show(kind: str, text: str, value: object) -> None:
    assert parse_answer(kind, text) == value


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("dimension", "1.5", 'expected a positive integer (the dimension\'s size), got "1.5"'),
        ("dimension", "0", 'got "0"'),
        ("dimension", "-3", 'got "-3"'),
        ("shape", "1.5, 4", '"1.5" is neither a positive integer nor a dimension name'),
        ("shape", "[0, 4]", '"0" is neither'),
        ("shape", "[8, 2x]", '"2x" is neither'),
        ("value", "relu", "expected a TOML value as in jaxlsp.toml"),
        ("inputs", "[1, 2]", "expected a table"),
        ("shape", "   ", "an answer is needed"),
        ("value", "x" * 5000, "at most 4,096 characters"),
    ],
)
def test_what_does_not_parse_says_what_was_expected(kind: str, text: str, message: str) -> None:
    with pytest.raises(AnswerError) as info:
        parse_answer(kind, text)
    assert message in str(info.value)


def _needs(tmp_path: Path) -> NeedsInput:
    (tmp_path / "model.py").write_text("def f(x): return x\n")
    return propose_target(tmp_path / "model.py", "f", base=tmp_path)


def test_fill_parses_typed_answers_round_by_round(tmp_path: Path) -> None:
    needs = _needs(tmp_path)
    (item,) = needs.missing
    assert item["kind"] == "inputs"
    path = item["path"]
    # Round 1: the inputs name a dimension; round 2 (same request): its size.
    filled = fill(needs, {path: '{ args = [{ kind = "array", shape = ["batch", 3] }] }', "profiles.f.dims.batch": "4"})
    assert isinstance(filled, Resolved), filled
    assert filled.answers == {path: {"args": [{"kind": "array", "shape": ["batch", 3]}]}, "profiles.f.dims.batch": 4}
    # Only the first round answered: the new item is asked, without errors.
    partial = fill(needs, {path: '{ args = [{ kind = "array", shape = ["batch", 3] }] }'})
    assert isinstance(partial, NeedsInput) and not partial.errors
    assert [m["path"] for m in partial.missing] == ["profiles.f.dims.batch"]


def test_fill_answers_needs_input_again_with_errors(tmp_path: Path) -> None:
    needs = _needs(tmp_path)
    path = needs.missing[0]["path"]
    again = fill(needs, {path: "[2, 3]"})  # parses, but an inputs answer must be a table
    assert isinstance(again, NeedsInput) and list(again.errors) == [path]
    assert again.missing == needs.missing and again.to_json()["errors"] == again.errors
    # Parses as a table, but a spec inside does not check: the problem is told under the answer.
    bad = fill(needs, {path: '{ args = [{ kind = "array", shape = [-2] }] }'})
    assert isinstance(bad, NeedsInput) and list(bad.errors) == [path]
    assert bad.errors[path].startswith("args[0].shape[0]: expected a positive integer"), bad.errors


def test_values_already_typed_by_an_older_client_are_taken_as_they_are(tmp_path: Path) -> None:
    table = {"target": "model.py::f", "inputs": {"args": [{"kind": "array", "shape": ["batch", 3]}]}}
    (tmp_path / "model.py").write_text("def f(x): return x\n")
    needs = resolve_table("p", table, tmp_path)
    assert isinstance(needs, NeedsInput)
    resolved = fill(needs, {"profiles.p.dims.batch": 2})
    assert isinstance(resolved, Resolved) and resolved.answers == {"profiles.p.dims.batch": 2}
