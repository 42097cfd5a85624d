"""Files any repository can hold, in an untrusted workspace, against the real server under a 4 GB
address-space limit (issue 20): brackets nested 2,000 deep (libcst's parser overflowed its stack:
SIGSEGV), a 20,000-term sum (a codeLens took over 55 s, holding every other request), a FIFO
named ``zz.py`` (indexing blocked forever, not even ``shutdown`` was answered), a symlink
``zero.py -> /dev/zero`` and a client-named ``file:///dev/zero`` (read until memory ran out), a
link to a file outside the workspace, a file over 1 MiB. The server keeps answering, says what it
did not analyse, gives the ordinary file its lens, runs nothing, and shuts down cleanly.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, RpcError, record, server_env, untrusted_workspace

INTERNAL_ERROR = -32603
FOUR_GB = 4 * 1024**3
ANSWER_WITHIN = scaled(5.0)  # seconds: a liveness bound, far above the milliseconds measured (record below)
HEADER = "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef {name}(x):\n    return {body}\n"


def hostile_workspace(tmp: Path) -> tuple[Path, Path]:
    root, sentinel = untrusted_workspace(tmp)
    deep = "(" * 2000 + "x" + ")" * 2000
    (root / "deep.py").write_text(HEADER.format(name="deep", body=f"jnp.sin({deep})"))
    (root / "long_sum.py").write_text(HEADER.format(name="long_sum", body="+".join(["x"] * 20_000)))
    (root / "good.py").write_text(HEADER.format(name="good", body="jnp.tanh(x)"))
    filler = "# " + "x" * 1000 + "\n"
    (root / "big.py").write_text(HEADER.format(name="big", body="jnp.cos(x)") + filler * 1100)
    os.mkfifo(root / "zz.py")
    os.symlink("/dev/zero", root / "zero.py")
    outside = tmp / "outside.py"
    outside.write_text(HEADER.format(name="outside", body="jnp.exp(x)"))
    os.symlink(outside, root / "linked.py")
    return root, sentinel


def lens_names(peer: Peer, uri: str) -> list[str]:
    lenses = peer.call("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=ANSWER_WITHIN)
    return [
        lens["data"]["name"] for lens in lenses or [] if not lens["data"].get("open") and not lens["data"].get("values")
    ]


def diagnostics(peer: Peer) -> dict[str, list[dict[str, Any]]]:
    latest: dict[str, list[dict[str, Any]]] = {}
    for message in peer.seen:
        if message.get("method") == "textDocument/publishDiagnostics":
            latest[message["params"]["uri"]] = message["params"]["diagnostics"]
    return latest


def wait_for_index(peer: Peer, timeout: float = scaled(60.0)) -> None:
    """The background index ends with a lens refresh (the client advertises refreshSupport)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(m.get("method") == "workspace/codeLens/refresh" for m in peer.server_requests):
            return
        time.sleep(0.05)
    raise AssertionError(f"the workspace index did not finish within {timeout} s")


def test_hostile_files_neither_crash_nor_stall_the_server(tmp_path: Path) -> None:
    root, sentinel = hostile_workspace(tmp_path)
    peer = Peer(env=server_env(), address_space=FOUR_GB)
    try:
        peer.initialize(root)
        # Requests keep being answered while the index builds around the hostile files.
        latencies = []
        for _ in range(20):
            started = time.monotonic()
            peer.call(
                "workspace/executeCommand", {"command": "jaxlsp.listTrusted", "arguments": []}, timeout=ANSWER_WITHIN
            )
            latencies.append(time.monotonic() - started)
        wait_for_index(peer)

        assert lens_names(peer, (root / "good.py").as_uri()) == ["good"]
        for name in ("deep", "long_sum"):  # opened as the editor would: the text comes from the client
            uri = peer.open(root / f"{name}.py")
            started = time.monotonic()
            assert lens_names(peer, uri) == [], name  # the statement was skipped, not parsed
            latencies.append(time.monotonic() - started)
        for name in ("zz.py", "zero.py", "big.py", "linked.py"):
            assert lens_names(peer, (root / name).as_uri()) == [], name
        for uri in ("file:///dev/zero", "file:///dev/null"):  # named by the client, not in the workspace
            assert lens_names(peer, uri) == []
            reply = peer.wait(peer.start("jaxlsp/discover", {"textDocument": {"uri": uri}}), ANSWER_WITHIN)
            assert reply.get("error", {}).get("code") != INTERNAL_ERROR, reply
            assert (
                peer.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
                is None
            )

        said = diagnostics(peer)
        expected = {
            "deep.py": "brackets nest more than 100 deep",
            "long_sum.py": "an expression chains more than 500 operations",
            "zz.py": "it is not a regular file",
            "zero.py": "a link to a file outside the workspace",  # never opened: /dev/zero is outside
            "big.py": "the file is larger than 1,024 KiB",
            "linked.py": "a link to a file outside the workspace",
        }
        for name, reason in expected.items():
            found = said.get((root / name).as_uri()) or said.get((root / name).resolve().as_uri()) or []
            assert any(reason in d["message"] and d["code"] == "not-analysed" for d in found), (name, found)
        assert "good.py" not in {Path(u).name for u in said}
        assert b"not analysed" in peer.stderr
        assert peer.alive()
        record(hostile_files_max_answer_s=round(max(latencies), 3))
    finally:
        code = peer.close()
    assert code == 0, peer.stderr.decode(errors="replace")[-2000:]
    assert not sentinel.exists(), sentinel.read_text()


def test_a_client_named_device_is_refused_cleanly(tmp_path: Path) -> None:
    root, _ = untrusted_workspace(tmp_path)
    peer = Peer(env=server_env())
    try:
        peer.initialize(root)
        for method, params in [
            ("jaxlsp/discover", {"textDocument": {"uri": "file:///dev/zero"}}),
            ("jaxlsp/nodesAt", {"textDocument": {"uri": "file:///dev/zero"}, "position": {"line": 0, "character": 0}}),
            (
                "textDocument/codeAction",
                {
                    "textDocument": {"uri": "file:///dev/zero"},
                    "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                    "context": {"diagnostics": []},
                },
            ),
            (
                "textDocument/inlayHint",
                {
                    "textDocument": {"uri": "file:///dev/zero"},
                    "range": {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}},
                },
            ),
        ]:
            try:
                peer.call(method, params, timeout=ANSWER_WITHIN)
            except RpcError as exc:
                assert exc.code != INTERNAL_ERROR, (method, exc)
        assert peer.alive()
    finally:
        assert peer.close() == 0
