"""``jaxlsp learn`` runs the first case of every test function before the second case of any.

A learning run of a test file ends at its time limit, and a parametrized test's cases mostly
repeat its calls at other sizes. On jax-resnet (a Flax Linen library), the test file's first test
builds five ResNet sizes, slow ones included, and the run's limit came before the tests that build
its other models: 5 of the 14 targets its tests call were learned. Here the first test's third case
ends the run (``pytest.exit``, as the limit does, without waiting for one): in pytest's own order
``halve``'s test never runs; with one case of each test first, it does.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import run

OPS = """import jax.numpy as jnp


def double(x):
    return x * 2.0


def halve(x):
    return jnp.tanh(x) / 2.0
"""

TESTS = """import jax.numpy as jnp
import pytest

import pkg


@pytest.mark.parametrize("n", [1, 2, 3])
def test_double(n):
    if n == 3:
        pytest.exit("the run ends here, as one stopped at its time limit does")
    assert pkg.double(jnp.ones((n, 2))).shape == (n, 2)


def test_halve():
    assert pkg.halve(jnp.ones((4, 2))).shape == (4, 2)
"""


def test_learn_reaches_every_test_function_before_a_second_case_of_one(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "cases"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("from pkg.ops import double as double, halve as halve\n")
    (root / "pkg" / "ops.py").write_text(OPS)
    (root / "tests" / "test_ops.py").write_text(TESTS)
    (root / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    learned = run(["learn", "--json", "tests/test_ops.py"], cwd=root)
    report = json.loads(learned.stdout)
    assert "pkg/ops.py::halve" in report["targets"], (report, learned.stderr)
    assert "pkg/ops.py::double" in report["targets"], report
