"""The statement scanner: strings, comments, brackets, continuations, decorators and recovery."""

from __future__ import annotations

from jaxlsp.discovery.chunks import Statement, logical_lines, statements


def split(source: str) -> list[tuple[int, int, int, str]]:
    return [(s.start, s.end, s.header, s.word) for s in statements(logical_lines(source))]


def test_statements_with_decorators_strings_and_compound_parts() -> None:
    source = (
        '"""doc\nwith jax"""\n'  # 0-1
        "import jax\n"  # 2
        "\n"  # 3
        "@partial(jax.jit,\n"  # 4
        "    static_argnums=1)\n"  # 5
        "def f(x, n):  # def g(): in a comment\n"  # 6
        "    s = '''\ndef not_a_def():\n'''\n"  # 7-9
        "    return x\n"  # 10
        "# between\n"  # 11
        "if True:\n"  # 12
        "    pass\n"  # 13
        "else:\n"  # 14
        "    x = [\n1, 2]\n"  # 15-16
        "class A(B): pass\n"  # 17
    )
    assert split(source) == [
        (0, 1, 0, ""),
        (2, 2, 2, "import"),
        (4, 10, 6, "def"),
        (12, 16, 12, "if"),
        (17, 17, 17, "class"),
    ]


def test_backslash_continuation_and_escaped_quotes() -> None:
    source = 'x = "a \\" # not a comment" + \\\n    "b"\ndef f():\n    return r"\\""\n'
    assert split(source) == [(0, 1, 0, "x"), (2, 3, 2, "def")]


def test_an_unclosed_bracket_recovers_at_the_next_definition() -> None:
    source = "def broken(x:\n    return 1\n@jax.jit\ndef ok():\n    pass\nclass C:\n    pass\n"
    assert split(source) == [(0, 1, 0, "def"), (2, 4, 3, "def"), (5, 6, 5, "class")]


def test_an_unterminated_triple_quote_ends_with_its_line() -> None:
    source = 'def f():\n    s = """oops\n    return 2\ndef g():\n    pass\n'
    assert split(source)[-1] == (3, 4, 3, "def")


def test_open_bracket_at_end_of_file_stays_inside_the_text() -> None:
    for source in ("class A:\n    x = f(\n", "class A:\n    x = f("):
        lines = logical_lines(source)
        assert lines[-1].end == 1
        assert statements(lines) == [Statement(0, 1, 0, "class")]


def test_class_body_statements_at_their_indentation() -> None:
    source = "class A:\n    x: int = 1\n    @nn.compact\n    def __call__(self, y):\n        return y\n    class B:\n        pass\n"
    body = statements(logical_lines(source), indent=4, first=1)
    assert [(s.start, s.end, s.header, s.word) for s in body] == [(1, 1, 1, "x"), (2, 4, 3, "def"), (5, 6, 5, "class")]


def test_crlf_and_empty_input() -> None:
    assert split("") == []
    from jaxlsp.discovery.chunks import normalize_newlines

    assert split(normalize_newlines("import a\r\ndef f():\r\n    pass\r\n")) == [(0, 0, 0, "import"), (1, 2, 1, "def")]
