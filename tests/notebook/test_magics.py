"""IPython lines neutralised in place: same line count, only logical-line starts."""

from __future__ import annotations

import ast

import pytest

from jaxlsp.notebook import neutralise


@pytest.mark.parametrize(
    "line",
    [
        "%matplotlib inline",
        "!pip install flax",
        "files = !ls",
        "t = %timeit -o f()",
        "model?",
        "jax.numpy.dot??",
        "?jax.jit",
        "%load_ext autoreload",
    ],
)
def test_ipython_lines_become_pass(line: str) -> None:
    text, found = neutralise(f"import jax\n{line}\nx = 1")
    assert text == "import jax\npass\nx = 1"
    assert [(n.line, n.text) for n in found] == [(1, line)]
    ast.parse(text)


def test_an_indented_magic_keeps_its_block_valid() -> None:
    text, found = neutralise("for i in range(3):\n    !echo $i\n")
    assert text == "for i in range(3):\n    pass\n"
    assert len(found) == 1
    ast.parse(text)


@pytest.mark.parametrize(
    "source",
    [
        'doc = """\n%not a magic\n!nor this\n"""',
        "x = (1 +\n%2)",  # inside brackets: Python's modulo
        "y = 5 % 2\nz = a != b\nw = {'k': 1}",
        "s = 'model?'",
        "f(x=1,\n  y=2)",
    ],
)
def test_python_is_left_alone(source: str) -> None:
    assert neutralise(source) == (source, [])


def test_a_python_cell_magic_keeps_its_body() -> None:
    text, found = neutralise("%%time\nmodel = MLP()\nmodel(x)")
    assert text == "pass\nmodel = MLP()\nmodel(x)"
    assert [n.line for n in found] == [0]


def test_another_cell_magic_blanks_its_cell_without_shifting_lines() -> None:
    text, found = neutralise("%%bash\necho hi\n\nls -l")
    assert text.split("\n") == ["pass", "", "", ""]
    assert [n.line for n in found] == [0, 1, 3]
