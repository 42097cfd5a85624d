"""Programs the differential fuzzer once failed on, kept as fixed regression tests (each checked
with every invariant of tests/fuzz/differential.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.differential import run
from tests.fuzz.programs import Program, array_spec

pytest.importorskip("jax")


def test_the_same_function_in_two_files_keeps_each_files_frames(tmp_path: Path) -> None:
    """Shrinking made many files with the same ``f``: code objects compare by value, and the
    worker's frame cache gave the second file's nodes the first file's path."""
    for name in ("prog_same_a", "prog_same_b"):
        program = Program(name, ["v1 = jnp.sin(x0)", "return v1"], ["x0"], [array_spec((3,))])
        assert run(program, tmp_path).valid


def test_a_named_scope_inside_a_function_is_not_a_sub_program(tmp_path: Path) -> None:
    """``jnp.einsum`` opens a named scope: a group of the graph that holds no sub-jaxpr."""
    body = ['v1 = jnp.einsum("...i,ij->...j", x0, w1)', "return v1"]
    program = Program("prog_einsum", body, ["x0", "w1"], [array_spec((2, 3)), array_spec((3, 2))])
    assert run(program, tmp_path).nodes == 1


def test_a_callback_on_a_symbolic_program_is_the_only_gap(tmp_path: Path) -> None:
    body = [
        "v1 = jnp.sin(x0)",
        "v2 = jax.pure_callback(lambda a: np.sin(a), jax.ShapeDtypeStruct(v1.shape, v1.dtype), v1)",
        "return v2",
    ]
    program = Program("prog_callback", body, ["x0"], [array_spec(())], symbolic=True, opaque=True)
    assert run(program, tmp_path).valid
