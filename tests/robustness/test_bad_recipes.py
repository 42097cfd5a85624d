"""Recipes that choked the TOML parser, through the real server (issue 25, item 7): a ``seed`` of
5,000 digits answered ``jaxlsp/environment`` with an internal error even before trust (the
environment check reads the recipe to pick the interpreter), and a 20,000-part dotted key held
the server 8.5 s. Before trust each request is answered (the trust refusal) at once; once
trusted, the trace is refused with the recipe error ``jaxlsp.toml:LINE: key.path: message`` and a
diagnostic on the recipe, and the session goes on. (The parser-level cases: tests/recipes/test_bounds.py.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, RpcError, server_env, untrusted_workspace

INTERNAL_ERROR, REQUEST_FAILED = -32603, -32803
ANSWER_WITHIN = 5.0  # seconds: a liveness bound, far above the ~30 ms measured (the dotted key took 9.8 s)
HEAD = 'version = 1\n[profiles.p]\ntarget = "model.py::predict"\n'
BAD = {
    "seed": (HEAD + "seed = " + "9" * 5000 + "\n", "jaxlsp.toml:4: profiles.p.seed: not accepted: an integer of more"),
    "dotted": (HEAD + "a" + ".a" * 20_000 + " = 1\n", "jaxlsp.toml:4: a.a.a.a.a"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_recipe_before_trust_is_answered(peer_factory: Any, tmp_path: Path, case: str) -> None:
    root, sentinel = untrusted_workspace(tmp_path)
    (root / "jaxlsp.toml").write_text(BAD[case][0])
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root)
    uri = peer.open(root / "model.py")
    for method in ("jaxlsp/environment", "jaxlsp/trace"):
        with pytest.raises(RpcError) as info:
            peer.call(method, {"textDocument": {"uri": uri}, "name": "predict"}, timeout=ANSWER_WITHIN)
        assert info.value.code == REQUEST_FAILED and "not trusted" in info.value.message, (method, info.value)
    assert peer.alive()
    assert not sentinel.exists()


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_recipe_once_trusted_is_a_recipe_error(peer_factory: Any, tmp_path: Path, case: str) -> None:
    root, sentinel = untrusted_workspace(tmp_path)
    (root / "jaxlsp.toml").write_text(BAD[case][0])
    peer: Peer = peer_factory(env=server_env())
    peer.answers["window/showMessageRequest"] = lambda params: {"title": "Trust once"}
    peer.initialize(root)
    uri = peer.open(root / "model.py")
    started = time.monotonic()
    with pytest.raises(RpcError) as info:
        peer.call("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict"}, timeout=scaled(60))
    took = time.monotonic() - started
    assert info.value.code != INTERNAL_ERROR, info.value
    assert BAD[case][1] in info.value.message, info.value.message
    recipe_uri = (root / "jaxlsp.toml").as_uri()
    published = [
        m["params"]["diagnostics"]
        for m in peer.seen
        if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == recipe_uri
    ]
    assert published and published[-1] and published[-1][0]["range"]["start"]["line"] == 3, published
    assert peer.alive()
    assert not sentinel.exists()  # refused before the interpreter was asked anything
    print(f"{case}: refused in {took:.2f} s")
