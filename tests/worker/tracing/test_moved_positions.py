"""A graph whose positions were moved to an edited text (live/relocate.py) is the graph a real
capture of that text gives: Linen modules, a multi-line call, a jaxtyping contract and a
non-ASCII line, each traced twice in-process (before and after a comment and formatting edit);
and the edits whose tree stays the same but whose capture differs (a coding cookie, a line
number read while the program runs) are never moved."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, graph_of, request

pytest.importorskip("flax")

Run = Callable[[dict[str, Any]], dict[str, Any]]

BEFORE = """import flax.linen as nn
import jax.numpy as jnp
from jaxtyping import Array, Float

from helpers import gelu


class Block(nn.Module):
    @nn.compact
    def __call__(self, x: Float[Array, "b d"]) -> Float[Array, "b d"]:
        h = nn.Dense(8, name="up")(x)
        h = gelu(h) * jnp.float32(0.5)
        return nn.Dense(x.shape[-1], name="down")(h) + x


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        for i in range(2):
            x = Block(name=f"block_{i}")(x)
        return jnp.sum(x * x, axis=-1)
"""

# comments (one with a non-ASCII word), blank lines, a call split over lines, other quotes and
# a trailing comma: the same syntax tree
AFTER = """import flax.linen as nn
import jax.numpy as jnp
from jaxtyping import Array, Float

from helpers import gelu

# the residual block: größer than it looks


class Block(nn.Module):
    @nn.compact
    def __call__(self, x: Float[Array, "b d"]) -> Float[Array, "b d"]:
        # up, then down
        h = nn.Dense(8, name='up')(x)
        h = gelu(
            h,
        ) * jnp.float32(0.5)
        return nn.Dense(x.shape[-1], name="down")(h) + x  # residual


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        for i in range(2):
            x = Block(name=f"block_{i}")(x)
        return jnp.sum(
            x * x, axis=-1
        )
"""

HELPERS = "import jax\n\n\ndef gelu(x):\n    return jax.nn.gelu(x)  # ünïcode\n"


def _capture(run: Run, root: Path, text: str) -> dict[str, Any]:
    (root / "model.py").write_text(text, encoding="utf-8")
    for name in ("model", "helpers"):
        sys.modules.pop(name, None)
    return graph_of(run(request("model.py", "Model", array(2, 4), workspace=root)))


def test_moved_graph_is_the_graph_of_the_edited_text(run_capture: Run, tmp_path: Path) -> None:
    from jaxlsp.graph import compact, io
    from jaxlsp.live.relocate import relocate
    from jaxlsp.live.samecode import moves

    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    before = _capture(run_capture, tmp_path, BEFORE)
    after = _capture(run_capture, tmp_path, AFTER)
    found = moves(BEFORE, AFTER)
    assert found is not None
    sha = hashlib.sha256(AFTER.encode("utf-8")).hexdigest()
    packed = relocate(compact.Packed(compact.encode(before)), {"model.py": found}, {"model.py": sha})
    assert packed is not None
    moved = io.to_json(packed.to_graph())
    assert [n["frames"] for n in moved["nodes"]] != [n["frames"] for n in before["nodes"]]  # they did move
    assert moved == after
    assert after["sources"]["model.py"] == sha and "helpers.py" in after["sources"]


def test_a_position_the_edit_cannot_place_gives_no_graph(run_capture: Run, tmp_path: Path) -> None:
    from jaxlsp.graph import compact
    from jaxlsp.live.relocate import relocate
    from jaxlsp.live.samecode import Moves, moves

    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    before = compact.Packed(compact.encode(_capture(run_capture, tmp_path, BEFORE)))
    assert relocate(before, {"model.py": Moves()}, {}) is None  # no position is known
    assert moves(BEFORE, BEFORE.replace("jnp.float32(0.5)", "jnp.float32(0.25)")) is None
    unchanged = moves(BEFORE, BEFORE)
    assert unchanged is not None and relocate(before, {"model.py": unchanged}, {}) is not None


def _prepared(request: dict[str, Any]) -> Any:
    """What ``request_key`` reads of a prepared capture."""
    from types import SimpleNamespace

    return SimpleNamespace(python="/usr/bin/python3", request=request)


def test_reuse_moves_the_newest_trace_only_while_the_program_is_the_same(run_capture: Run, tmp_path: Path) -> None:
    from jaxlsp.capture.engine import TraceOutcome
    from jaxlsp.capture.reuse import Reuse, request_key
    from jaxlsp.graph import compact
    from jaxlsp.graph.store import GraphStore

    (tmp_path / "helpers.py").write_text(
        HELPERS.replace(
            "import jax\n",
            "import jax\nimport json\nOPEN = json.load(open(__file__.replace('helpers.py', 'cfg.json')))\n",
        )
    )
    (tmp_path / "cfg.json").write_text("{}")
    graph = _capture(run_capture, tmp_path, BEFORE)
    assert {"model.py", "helpers.py", "cfg.json"} <= set(graph["sources"])
    store = GraphStore()
    meta = {"uri": "file:///model.py", "name": "Model", "roots": {"base": str(tmp_path)}}
    first = store.keep(GraphStore.build(compact.Packed(compact.encode(graph)), meta))
    key = request_key(_prepared({"profile": {"inputs": {}}, "offline": True}))
    reuse = Reuse()
    reuse.remember(first, key, TraceOutcome(graph=first.info, capture=None, resolved=None))  # type: ignore[arg-type]

    (tmp_path / "model.py").write_text(AFTER, encoding="utf-8")
    found = reuse.moved(
        first, request_key(_prepared({"profile": {"inputs": {}}})), {"uri": meta["uri"], "name": "Model"}
    )
    assert found is not None
    second, outcome = found
    assert second.id != first.id and outcome.graph.sources == second.info.sources
    assert second.info.sources["model.py"] == hashlib.sha256(AFTER.encode()).hexdigest()
    assert store.keep(second).changes_since(first).same
    other = request_key(_prepared({"profile": {"inputs": {"x": 1}}}))
    assert reuse.moved(first, other, meta) is None  # other inputs: a capture
    assert request_key(_prepared({"profile": {}, "values": {}})) is None  # a run measures: never reused

    (tmp_path / "cfg.json").write_text('{"width": 3}')
    assert reuse.moved(first, key, meta) is None  # a data file it read changed: a capture


def _out_shape(graph: dict[str, Any]) -> list[Any]:
    values = {v["id"]: v for v in graph["values"]}
    return list(values[graph["outputs"][0]["value"]]["shape"])


# a file whose program the tree does not hold all of: what its encoding makes of a string, and a
# line number it reads while it runs
READS_TEXT = 'import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.zeros(len("ünï")) + x.sum()\n'
READS_LINE = (
    "import inspect\n\nimport jax.numpy as jnp\n\n\n"
    "def f(x):\n    return jnp.zeros(inspect.currentframe().f_lineno) + x.sum()\n"
)
# a helper that reads its caller's line: only the caller's file (which names no frame) moves
CALLER = "import jax.numpy as jnp\nfrom lines import here\n\n\ndef f(x):\n    return jnp.zeros(here()) + x.sum()\n"
LINES = "import sys\n\n\ndef here():\n    return sys._getframe(1).f_lineno\n"
# a cookie (comment-only) and blank lines: the same syntax tree, another program
EDITS = [
    (READS_TEXT, "# -*- coding: latin-1 -*-\n" + READS_TEXT, [3], [5]),
    (READS_LINE, READS_LINE.replace("def f", "\n\n\n\n\ndef f"), [7], [12]),
    (CALLER, CALLER.replace("def f", "# more room\n\ndef f"), [6], [8]),
]


@pytest.mark.parametrize(("old", "new", "was", "now"), EDITS, ids=["coding-cookie", "line-number", "caller-line"])
def test_an_edit_the_tree_cannot_see_is_traced_again(
    run_capture: Run, tmp_path: Path, old: str, new: str, was: list[int], now: list[int]
) -> None:
    from jaxlsp.capture.engine import TraceOutcome
    from jaxlsp.capture.reuse import Reuse, request_key
    from jaxlsp.graph import compact
    from jaxlsp.graph.store import GraphStore

    def capture(text: str) -> dict[str, Any]:
        (tmp_path / "model.py").write_text(text, encoding="utf-8")  # the cookie's bytes are UTF-8's
        sys.modules.pop("model", None)
        sys.modules.pop("lines", None)
        return graph_of(run_capture(request("model.py", "f", array(2), workspace=tmp_path)))

    (tmp_path / "lines.py").write_text(LINES, encoding="utf-8")

    graph = capture(old)
    store = GraphStore()
    meta = {"uri": "file:///model.py", "name": "f", "roots": {"base": str(tmp_path)}}
    first = store.keep(GraphStore.build(compact.Packed(compact.encode(graph)), meta))
    key = request_key(_prepared({"profile": {"inputs": {}}}))
    reuse = Reuse()
    reuse.remember(first, key, TraceOutcome(graph=first.info, capture=None, resolved=None))  # type: ignore[arg-type]
    cold = capture(new)
    assert (_out_shape(graph), _out_shape(cold)) == (was, now)  # what a capture of each gives
    assert reuse.moved(first, key, {"uri": meta["uri"], "name": "f"}) is None  # not the old graph, moved
