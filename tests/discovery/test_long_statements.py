"""A long statement is scanned in steps (issue 25): one ``def`` under 100,000 decorator lines is one
statement, and grouping its lines took 0.15-0.3 s of CPU in one piece on the server's event loop
(the soak's loop watchdog). ``summarize_steps`` now pauses every ``TICK`` tokens inside it too,
and the summary is the same."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.discovery import chunks, index

DECORATORS = 20_000


def test_one_statement_of_many_lines_is_summarised_in_many_steps(tmp_path: Path) -> None:
    text = "import jax\n\n" + "@jax.jit\n" * DECORATORS + "def f(x):\n    return x\n\ny = 1\n"
    path = tmp_path / "decorated.py"
    steps = index.summarize_steps(path, "decorated", text, index.ChunkCache())
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            summary = done.value
            break
        pauses += 1
    assert pauses >= DECORATORS // index.TICK, f"{pauses} pauses for three statements"
    whole = index.summarize_file(path, "decorated", text, index.ChunkCache())
    assert [(start, info.kind) for start, info in summary.chunks] == [(s, i.kind) for s, i in whole.chunks]
    assert len(summary.chunks) == 3


def test_statements_are_the_same_with_ticks() -> None:
    text = "import jax\n\n@jax.jit\n@partial(\n  f)\ndef g(x):\n    '''a\n    doc'''\n    return x\n\nclass C:\n    a = 1\n"
    ticking = [s for s in chunks.ticking_statements(chunks.ticking_logical_lines(text, 1)) if s is not None]
    assert ticking == list(chunks.iter_statements(chunks.iter_logical_lines(text)))
    assert None in list(chunks.ticking_logical_lines(text, 1))
    assert None not in list(chunks.ticking_logical_lines(text, 0))
