"""Discovery's parse budget (``jaxlsp/discovery/budget.py``): what libcst is never given.

Each hostile form was measured against libcst 1.9 (see the module's docstring): brackets nested
1,500 deep crash its parser (SIGSEGV), and left-recursive chains take quadratic time. The budget
refuses them before the parser runs, lets real code through, and a refused statement costs only
itself: the rest of the file is still discovered.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jaxlsp.discovery import Classifier, WorkspaceIndex, budget
from jaxlsp.discovery.chunks import logical_lines, normalize_newlines, statements
from jaxlsp.discovery.index import ChunkCache, summarize_file

HOSTILE = {
    "nested parentheses": "(" * 2000 + "x" + ")" * 2000,
    "nested lists": "[" * 300 + "]" * 300,
    "a long sum": "+".join(["x"] * 20_000),
    "a subscript chain": "x" + "[0]" * 600,
    "an attribute chain": "x" + ".a" * 600,
    "a call chain": "f" + "()" * 600,
    "unary minus": "-" * 600 + "x",
    "not": "not " * 600 + "x",
    "lambdas": "lambda: " * 600 + "x",
    "conditional expressions": " if c else ".join(["x"] * 600),
}


def function(body: str) -> str:
    return f"import jax\n\n\n@jax.jit\ndef f(x):\n    return {body}\n"


@pytest.mark.parametrize("form", sorted(HOSTILE))
def test_hostile_statements_are_refused_before_parsing(form: str) -> None:
    cost = budget.scan(function(HOSTILE[form]))
    assert cost.refusal is not None, form
    assert cost.refusal.line == 5  # the line of the return, within the statement


def test_strings_and_comments_do_not_count() -> None:
    text = 'x = """' + "(((-+.[" * 5000 + '"""  # ' + "(((" * 5000 + "\ny = '" + "-" * 5000 + "'\n"
    assert budget.scan(text) == budget.Cost(None, 0)


def test_real_code_is_never_refused() -> None:
    """Every file of the installed flax, equinox and jax._src passes (12 MB of real JAX code)."""
    import equinox
    import flax
    import jax

    roots = [Path(flax.__file__).parent, Path(equinox.__file__).parent, Path(jax.__file__).parent / "_src"]
    files = [p for root in roots for p in root.rglob("*.py")]
    assert len(files) > 300
    refused = [(p, c.refusal) for p in files for c in statement_scans(p.read_text(errors="replace")) if c.refusal]
    assert refused == []


def statement_scans(text: str) -> list[budget.Cost]:
    """Each top-level statement's pre-scan, as the index runs it (a class statement's tokens are
    bounded piece by piece: its header and fields, not its whole body)."""
    lines = normalize_newlines(text).split("\n")
    out = []
    for st in statements(logical_lines("\n".join(lines))):
        chunk = "\n".join(lines[st.start : st.end + 1]) + "\n"
        is_class = st.word == "class" or (st.word == "@" and lines[st.header].lstrip().startswith("class"))
        out.append(budget.scan(chunk, None if is_class else budget.MAX_TOKENS))
    return out


def test_a_refused_statement_costs_only_itself(tmp_path: Path) -> None:
    source = function(HOSTILE["nested parentheses"]) + "\n\n@jax.jit\ndef g(x):\n    return x * 2\n"
    path = tmp_path / "m.py"
    path.write_text(source)
    index = WorkspaceIndex([tmp_path])
    found = Classifier(index).discover(path)
    assert [e.name for e in found.entrypoints] == ["g"]
    assert [(s.line, s.reason) for s in index.skips(path)] == [(5, "brackets nest more than 100 deep")]


def test_the_file_budget_bounds_many_long_chains(tmp_path: Path) -> None:
    chain = "x" + "[0]" * 400  # under the statement bound, 160,000 units each
    text = "".join(f"v{i} = {chain}\n" for i in range(40))
    fs = summarize_file(tmp_path / "m.py", "m", text, ChunkCache())
    allowed = budget.FILE_BUDGET // budget.scan(f"v0 = {chain}\n").units
    assert len(fs.skipped) == 40 - allowed
    assert all(s.reason == budget.SPENT for s in fs.skipped)
    assert fs.skipped[0].line == allowed


def test_scanning_is_cheap_next_to_parsing(tmp_path: Path) -> None:
    """Not a timing bar (that is benchmarks/discovery.py): a sanity check that the scan of a
    large real file is far below what parsing it costs, so a regression to quadratic shows."""
    import jax

    text = (Path(jax.__file__).parent / "_src" / "numpy" / "lax_numpy.py").read_text()
    started = time.perf_counter()
    for _ in range(3):
        budget.scan(text)
    scanned = (time.perf_counter() - started) / 3
    import libcst

    started = time.perf_counter()
    libcst.parse_module(text)
    parsed = time.perf_counter() - started
    assert scanned < parsed / 5, (scanned, parsed)


def test_a_file_is_summarised_up_to_its_statement_budget(tmp_path: Path) -> None:
    """100,000 distinct assignments: 15 s of parsing, and garbage-collector passes of up to 1.5 s
    over their summaries (issue 25). The first MAX_STATEMENTS count, the rest is said once."""
    head = "import jax\n\n\n@jax.jit\ndef f(x):\n    return x\n\n\n"
    text = head + "".join(f"a{i} = b\n" for i in range(budget.MAX_STATEMENTS + 5_000))
    fs = summarize_file(tmp_path / "m.py", "m", text, ChunkCache())
    assert len(fs.chunks) == budget.MAX_STATEMENTS
    assert fs.skipped == [budget.Refusal(head.count("\n") + budget.MAX_STATEMENTS - 2, budget.TOO_MANY)]
    assert "f" in fs.bindings and len(fs.line_lengths) == text.count("\n") + 1


def test_classes_nested_too_deep_are_refused_in_one_pass() -> None:
    """1,000 nested classes (issue 25): refused at the 21st level, as before, but found by one pass
    over the logical lines instead of a dedent and re-index of the rest of the statement at each
    level (0.2 s of the event loop in the soak). Not a timing bar: the refusal must cost about what
    that one pass costs (it cost 5-9 times as much), whatever the machine's speed."""
    from jaxlsp.discovery.summary import summarize

    depth = budget.MAX_CLASS_NESTING
    text = "".join(" " * i + f"class C{i}:\n" for i in range(1000)) + " " * 1000 + "x = 1\n"

    def fastest(action: Callable[[], object]) -> float:
        times = []
        for _ in range(5):
            started = time.process_time()
            action()
            times.append(time.process_time() - started)
        return min(times)

    info = summarize(text, "class", 0)
    assert info.kind == "skipped"
    assert info.skipped == budget.Refusal(depth + 1, f"classes nest more than {depth} deep")
    # a class in a method or in an if of a class body is not nested in it: not refused
    shallow = "class A:\n    def f(self):\n" + "".join(" " * (8 + 4 * i) + f"class D{i}:\n" for i in range(30))
    assert summarize(shallow + " " * 128 + "x = 1\n", "class", 0).kind == "class"
    one_pass = fastest(lambda: logical_lines(text))
    refused = fastest(lambda: summarize(text, "class", 0))
    assert refused < 2.5 * one_pass, (refused, one_pass)
