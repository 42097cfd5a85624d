"""Which edits leave a file's program as it was (live/samecode.py), and where its positions went."""

from __future__ import annotations

from jaxlsp.live.samecode import moves

OLD = """import jax.numpy as jnp


def f(x):
    y = jnp.tanh(x)
    return y * 2
"""


def test_comments_and_blank_lines_keep_the_program_and_move_its_spans() -> None:
    new = OLD.replace("def f(x):\n", "# a comment\n\ndef f(x):  # f\n    # the body\n")
    found = moves(OLD, new)
    assert found is not None
    assert found.span(5, 8, 5, 19) == (8, 8, 8, 19)  # jnp.tanh(x)
    assert found.span(6, 11, 6, 16) == (9, 11, 9, 16)  # y * 2
    assert found.lines(4, 6) == (6, 9)  # the function
    assert found.first_line(5) == 8


def test_what_a_formatter_changes_keeps_the_program() -> None:
    old = "def g(a, b):\n    return f('x', (a), b)\n"
    new = 'def g(a, b):\n    return f(\n        "x",\n        a,\n        b,\n    )\n'
    found = moves(old, new)
    assert found is not None
    assert found.span(2, 11, 2, 25) == (2, 11, 6, 5)  # the call, now over five lines
    assert found.span(2, 19, 2, 20) == (4, 8, 4, 9)  # a, without its parentheses


def test_a_change_of_code_or_docstring_or_a_syntax_error_is_not_the_same_program() -> None:
    assert moves(OLD, OLD.replace("y * 2", "y * 3")) is None
    assert moves(OLD, OLD.replace("def f(x):\n", 'def f(x):\n    """Doubled tanh."""\n')) is None
    assert moves(OLD, OLD.replace("def f(x):", "def f(x)")) is None
    assert moves("x = 1\n", "x = 1.0\n") is None
    assert moves("x = 1\n", "x = True\n") is None


def test_columns_are_code_points_on_a_line_with_wide_characters() -> None:
    old = 'y = g("ü", x)\n'
    new = '# größer\ny = g("ü",   x)\n'
    found = moves(old, new)
    assert found is not None
    assert found.span(1, 4, 1, 13) == (2, 4, 2, 15)  # ü is one column, two bytes


def test_a_span_two_nodes_share_that_went_two_ways_has_no_answer() -> None:
    # a call statement: the statement and its call have one span; parenthesised, they differ
    found = moves("print(x)\n", "(print(x))\n")
    assert found is not None
    assert found.span(1, 0, 1, 8) is None
    assert found.span(1, 6, 1, 7) == (1, 7, 1, 8)  # x is still one node's


def test_a_decorated_definition_starts_at_its_first_decorator() -> None:
    old = "@dec\ndef f(x):\n    return x\n"
    new = "\n\n@dec  # why\ndef f(x):\n    return x\n"
    found = moves(old, new)
    assert found is not None
    assert found.lines(1, 3) == (3, 5) and found.lines(2, 3) == (4, 5)


def test_windows_line_endings_count_lines_as_python_does() -> None:
    found = moves("a = 1\r\nb = a\r\n", "a = 1\r\n\r\nb = a\r\n")
    assert found is not None
    assert found.span(2, 0, 2, 5) == (3, 0, 3, 5)


def test_an_encoding_declaration_added_or_changed_is_a_change() -> None:
    # the same characters, other bytes to Python: a latin-1 cookie reads "ü" (two UTF-8 bytes)
    # as two characters, so len("ü") is 2 where it was 1
    old = 'n = len("ü")\n'
    assert moves(old, "# -*- coding: latin-1 -*-\n" + old) is None
    assert moves("# coding: latin-1\nn = 1\n", "# coding: latin-1\n\nn = 1\n") is None  # not UTF-8
    assert moves(old, "\ufeff" + old) is None  # a byte-order mark added
    utf8 = moves(old, "# -*- coding: utf-8 -*-\n" + old)  # the encoding it had: the same program
    assert utf8 is not None and utf8.first_line(1) == 2
    bom = moves("\ufeff" + old, "\ufeff# c\n" + old)  # kept: no column of its own
    assert bom is not None and bom.span(1, 4, 1, 12) == (2, 4, 2, 12)


def test_code_that_reads_its_own_lines_or_frames_is_never_moved() -> None:
    from jaxlsp.live.samecode import reads_positions

    readers = [
        "import inspect\n\ndef f(x):\n    return x[: inspect.currentframe().f_lineno]\n",
        "import sys\nn = sys._getframe(0).f_lineno\n",
        "def f():\n    pass\nn = f.__code__.co_firstlineno\n",
        "import inspect\nn = len(inspect.getsource(len))\n",
        "from inspect import getsourcelines\n",
        "import inspect as ins\nn = len(ins.stack())\n",
        "import traceback\nn = len(traceback.format_stack())\n",
        "from traceback import extract_stack\n",
        "def f(frame):\n    return getattr(frame, 'f_lineno')\n",
    ]
    for text in readers:
        assert reads_positions(text), text
        assert moves(text, "\n\n" + text) is None, text
    quiet = "import inspect\nimport jax.numpy as jnp\nsig = inspect.signature(len)\ny = jnp.stack([1])\n"
    assert not reads_positions(quiet)  # a signature and jnp.stack read no line
    assert moves(quiet, "# c\n" + quiet) is not None
    assert not reads_positions("from .traceback import helper\n")  # the workspace's own module
    assert reads_positions("def f(:\n")  # cannot tell: as if it did
