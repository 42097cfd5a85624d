"""Big answers never hold the requests behind them (issue 25), against the real server over stdio.

The hostile-workspace soak (``benchmarks/soak.py --watch``) found the event loop held 0.15-0.34 s
while pygls converted and encoded the 2,001 lenses of a 25,000-function file in one piece (cattrs,
then ``json.dumps``), and ``jaxlsp/discover`` answering every one of 25,000 entrypoints (9 MB).
Lenses and discover answers are now encoded in slices (``jaxlsp/server/encoded.py``), and discover
lists at most 2,000 of each with ``truncated`` saying how many there are. The checks are orders of
events, never times: a hover sent in the same write right behind a lens request is answered first.
"""

from __future__ import annotations

from pathlib import Path

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, send_together, server_env

FUNCTIONS = 2_500  # over the 2,000 entrypoints a document's lenses and discover answer list
ANSWER_WITHIN = 60.0  # seconds (reference machine; scaled at each wait): a liveness bound (2,500 functions: ~1 s)


def many_functions(root: Path) -> Path:
    path = root / "functions.py"
    path.write_text("import jax\n\n" + "".join(f"@jax.jit\ndef f{i}(x):\n    return x\n\n" for i in range(FUNCTIONS)))
    return path


def test_a_hover_behind_two_thousand_lenses_is_answered_first(tmp_path: Path) -> None:
    path = many_functions(tmp_path)
    peer = Peer(env=server_env())
    try:
        peer.initialize(tmp_path)
        uri = peer.open(path)
        doc = {"textDocument": {"uri": uri}}
        lenses = peer.call("textDocument/codeLens", doc, timeout=scaled(ANSWER_WITHIN))  # summarised and kept
        assert len(lenses) == 2_001
        hover = {**doc, "position": {"line": 3, "character": 4}}
        # The cursor move between them keeps the hover from going first (jaxlsp/server/lookahead.py):
        # it is read once the lens request is handled, and must still not wait for its answer.
        boxes = send_together(
            peer,
            [
                (9001, "textDocument/codeLens", doc),
                (None, "jaxlsp/cursorMoved", hover),
                (9002, "textDocument/hover", hover),
            ],
        )
        again = boxes[9001].get(timeout=scaled(ANSWER_WITHIN))
        boxes[9002].get(timeout=scaled(ANSWER_WITHIN))
        # The same answer as before, the hover's came first: the lenses were encoded in slices
        # (before, in one piece on the loop, answered before the hover was even read).
        assert again["result"] == lenses
        assert lenses[-1]["command"]["title"].startswith("jaxlsp: 500 more entrypoints here get no lens")
        assert lenses[0] == {
            "range": {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 10}},
            "data": {"uri": uri, "name": "f0", "kind": "function"},
        }
        assert boxes[9002].rank is not None and boxes[9001].rank is not None
        assert boxes[9002].rank < boxes[9001].rank, "the hover waited for the whole lens answer"
    finally:
        peer.close()


def test_discover_lists_at_most_two_thousand_entrypoints_and_says_how_many_there_are(tmp_path: Path) -> None:
    path = many_functions(tmp_path)
    peer = Peer(env=server_env())
    try:
        peer.initialize(tmp_path)
        uri = peer.open(path)
        found = peer.call("jaxlsp/discover", {"textDocument": {"uri": uri}}, timeout=scaled(ANSWER_WITHIN))
        assert [e["name"] for e in found["entrypoints"]] == [f"f{i}" for i in range(2_000)]
        assert found["drivers"] == []
        assert found["truncated"] == {"entrypoints": FUNCTIONS, "drivers": 0, "limit": 2_000}
        # A document under the limit has no ``truncated``.
        small = tmp_path / "small.py"
        small.write_text("import jax\n\n@jax.jit\ndef g(x):\n    return x\n")
        few = peer.call("jaxlsp/discover", {"textDocument": {"uri": peer.open(small)}}, timeout=scaled(ANSWER_WITHIN))
        assert [e["name"] for e in few["entrypoints"]] == ["g"] and "truncated" not in few
    finally:
        peer.close()
