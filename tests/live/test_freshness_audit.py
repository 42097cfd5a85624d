"""The freshness audit (benchmarks/freshness.py, issue 45) on a small series: a real server over
stdio, each edit followed by the live hover, an explicit trace and a cold ``jaxlsp trace``, and
what is shown as fresh equal to the cold graph.

Only kinds that agree today run here (``make bench`` runs all 36 edits): a comment, a formatter's
edit, an edit inside the traced function, a constructor's read of a file and an installed
package changed on disk, spread over Linen, NNX and Equinox.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests import deadlines

pytest.importorskip("flax")
pytest.importorskip("equinox")

ROOT = Path(__file__).resolve().parents[2]
#: (kind, framework): kinds that agree on the current main, each on another framework
FAST = [("comment", "linen"), ("formatting", "nnx"), ("inside", "eqx"), ("file", "nnx"), ("package", "linen")]


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("freshness", ROOT / "benchmarks" / "freshness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["freshness"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_what_is_shown_as_fresh_is_what_a_cold_trace_gives(tmp_path: Path) -> None:
    audit = _benchmark()
    every = audit.series()
    edits = [next(e for e in every if (e.kind, e.fw) == pair) for pair in FAST]
    layout = audit.build(tmp_path / "audit")
    said: list[str] = []
    rows = audit.audit(layout, edits, deadline=deadlines.Deadline, run=deadlines.run, say=said.append)
    report = audit.report(rows)
    assert [r.edit.kind for r in rows] == [kind for kind, _ in FAST], report
    for row in rows:
        # each edit had a graph shown as fresh and an explicit one, both compared with the cold one
        assert row.live_agrees is not None and row.explicit_agrees is not None, "\n".join(said)
    assert not [r.edit.label for r in rows if r.mismatch], report + "\n" + "\n".join(said)
    assert "mismatches: 0 of 5 edits" in report
    comment = rows[0]
    assert comment.live_reused and comment.live == comment.cold == "[2,5]"  # a moved graph, as a capture gives
    assert rows[2].cold == "[2,10]" and not rows[2].live_reused  # a change of the program: rebuilt
