"""A hover goes before the requests buffered ahead of it that cannot change its answer, and never
past anything that can (``jaxlsp/server/lookahead.py``), against the real server over stdio.

The soak found hovers sent during a burst of 1,000 traces answered in 200-370 ms: each waited for
every trace in front of it, though the loop never stalled (issue 25). The checks are orders of
answers, never times: the burst and the hover go in one write, so the server reads them together.
"""

from __future__ import annotations

from pathlib import Path

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, send_together, server_env

BURST = 1_500  # requests sent ahead of the hover
ANSWER_WITHIN = 60.0  # seconds (reference machine; scaled at each wait): a liveness bound (the burst takes ~1 s)
SOURCE = "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef f(x):\n    return jnp.sin(x)\n"


def burst_then_hover(tmp_path: Path, between: list[tuple[int | None, str, object]]) -> tuple[int, list[int]]:
    """Send ``BURST`` ``jaxlsp/nodesAt`` requests, ``between``, and a hover, in one write: the
    hover's rank among the answers, and the burst's ranks."""
    path = tmp_path / "model.py"
    path.write_text(SOURCE)
    peer = Peer(env=server_env())
    try:
        peer.initialize(tmp_path)
        uri = peer.open(path)
        at = {"textDocument": {"uri": uri}, "position": {"line": 6, "character": 12}}
        burst: list[tuple[int | None, str, object]] = [(i, "jaxlsp/nodesAt", at) for i in range(1, BURST + 1)]
        hover = 10 * BURST
        boxes = send_together(peer, [*burst, *between, (hover, "textDocument/hover", at)])
        for box in boxes.values():
            reply = box.get(timeout=scaled(ANSWER_WITHIN))
            assert "error" not in reply, reply
        ranks = [boxes[i].rank for i in range(1, BURST + 1)]
        assert boxes[hover].rank is not None and None not in ranks
        return boxes[hover].rank, ranks  # type: ignore[return-value]
    finally:
        peer.close()


def test_a_hover_goes_before_the_requests_buffered_ahead_of_it(tmp_path: Path) -> None:
    hover, burst = burst_then_hover(tmp_path, [])
    ahead = sum(rank < hover for rank in burst)
    # In order, all 1,500 would be answered first. The server may have read the first few before
    # the rest of the write arrived; it looks at 1,000 buffered messages per message it handles.
    assert ahead < BURST // 2, f"{ahead} of {BURST} requests sent before the hover were answered before it"
    assert burst == sorted(burst), "the burst itself was answered out of order"


def test_a_hover_never_goes_past_a_change_of_the_document(tmp_path: Path) -> None:
    uri = (tmp_path / "model.py").as_uri()
    change = {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"text": SOURCE + "\n\n@jax.jit\ndef g(x):\n    return jnp.cos(x)\n"}],
    }
    hover, burst = burst_then_hover(tmp_path, [(None, "textDocument/didChange", change)])
    assert hover > max(burst), "the hover went past the didChange in front of it"
