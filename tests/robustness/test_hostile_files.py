"""Files any repository can hold, in an untrusted workspace, against the real server under a 4 GB
address-space limit (issue 20): brackets nested 2,000 deep (libcst's parser overflowed its stack:
SIGSEGV), a 20,000-term sum (a codeLens took over 55 s, holding every other request), a FIFO
named ``zz.py`` (indexing blocked forever, not even ``shutdown`` was answered), a symlink
``zero.py -> /dev/zero`` and a client-named ``file:///dev/zero`` (read until memory ran out), a
link to a file outside the workspace, a file over 1 MiB. The server keeps answering, says what it
did not analyse, gives the ordinary file its lens, runs nothing, and shuts down cleanly.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from tests.deadlines import Deadline, scaled
from tests.robustness.helpers import Peer, RpcError, record, server_env, untrusted_workspace

INTERNAL_ERROR = -32603
FOUR_GB = 4 * 1024**3
ANSWER_WITHIN = 5.0  # seconds (reference machine; scaled at each wait): a liveness bound, far above the ms measured
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
    lenses = peer.call("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=scaled(ANSWER_WITHIN))
    return [
        lens["data"]["name"] for lens in lenses or [] if not lens["data"].get("open") and not lens["data"].get("values")
    ]


def diagnostics(peer: Peer) -> dict[str, list[dict[str, Any]]]:
    latest: dict[str, list[dict[str, Any]]] = {}
    for message in peer.seen:
        if message.get("method") == "textDocument/publishDiagnostics":
            latest[message["params"]["uri"]] = message["params"]["diagnostics"]
    return latest


def wait_for_index(peer: Peer, seconds: float = 60.0) -> None:
    """The background index ends with a lens refresh (the client advertises refreshSupport);
    within ``seconds`` on the reference machine (a :class:`Deadline`: it follows this machine)."""
    deadline = Deadline(seconds)
    while not deadline.expired():
        if any(m.get("method") == "workspace/codeLens/refresh" for m in peer.server_requests):
            return
        time.sleep(0.05)
    raise AssertionError(f"the workspace index did not finish within {deadline}")


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
                "workspace/executeCommand",
                {"command": "jaxlsp.listTrusted", "arguments": []},
                timeout=scaled(ANSWER_WITHIN),
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
            reply = peer.wait(peer.start("jaxlsp/discover", {"textDocument": {"uri": uri}}), scaled(ANSWER_WITHIN))
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
                peer.call(method, params, timeout=scaled(ANSWER_WITHIN))
            except RpcError as exc:
                assert exc.code != INTERNAL_ERROR, (method, exc)
        assert peer.alive()
    finally:
        assert peer.close() == 0


# -- files under the size caps that froze the server (issue 25) -----------------------------------

IMPORTS = "import jax\nimport jax.numpy as jnp\n\n"
WORST_HOVER = 2.0  # seconds: each case below held every request 8 to 29 s before (record below)
LONG_ANSWERS = ("functions.py", "cells.ipynb")  # 10,000 entrypoints each
WATCHED_WORST_HOVER = 1.0  # seconds: 0.2 s measured, 2.9 s before


def notebook(cells: list[str]) -> str:
    return json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
            "cells": [
                {"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                for c in cells
            ],
        }
    )


def big_files() -> dict[str, str]:
    """Each under its cap (1 MiB, 16 MiB for a notebook), measured on the code before issue 25:
    worst hover latency while it was opened and asked for lenses and entrypoints."""
    return {
        # 29 s, 2.3 GB: one libcst parse of 900,000 tokens
        "literal.py": IMPORTS + "@jax.jit\ndef f(x):\n    return x\n\nDATA = jnp.array([" + "0," * 450_000 + "])\n",
        # 2.8-4.5 s: 100,000 assignments parsed, then garbage-collector passes over their summaries
        "statements.py": IMPORTS + "".join(f"a{i}=b\n" for i in range(100_000)),
        # 23 s: one def under 100,000 decorators
        "decorators.py": IMPORTS + "@jax.jit\n" * 100_000 + "def f(x):\n    return x\n",
        # 20 s, a 5.5 MB lens answer
        "functions.py": IMPORTS + "".join(f"def f{i}(x): return jnp.sin(x)\n" for i in range(25_000)),
        # 8 s, then -32603 RecursionError
        "nested.py": IMPORTS + "".join(" " * i + f"class C{i}:\n" for i in range(1000)) + " " * 1000 + "x: int\n",
        # 23 s (its entrypoints' items were each built from a new split of the whole module)
        "cells.ipynb": notebook([IMPORTS] + [f"@jax.jit\ndef f{i}(x):\n    return jnp.sin(x)" for i in range(10_000)]),
        # -32603 RecursionError from json's decoder
        "deep.ipynb": "[" * 100_000 + "]" * 100_000,
    }


class HoverProbe:
    """A hover on ``uri`` every 100 ms from a thread; ``worst`` is the slowest answer."""

    def __init__(self, peer: Peer, uri: str) -> None:
        self.peer, self.uri = peer, uri
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        params = {"textDocument": {"uri": self.uri}, "position": {"line": 0, "character": 0}}
        while not self._stop.is_set():
            started = time.monotonic()
            self.peer.call("textDocument/hover", params, timeout=scaled(120))
            self.latencies.append(time.monotonic() - started)
            self._stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.latencies)


def test_big_files_under_the_caps_never_hold_the_loop(tmp_path: Path) -> None:
    root, sentinel = untrusted_workspace(tmp_path)
    (root / "good.py").write_text(HEADER.format(name="good", body="jnp.tanh(x)"))
    peer = Peer(env=server_env(), address_space=FOUR_GB)
    worst: dict[str, float] = {}
    answers: dict[str, dict[str, Any]] = {}
    try:
        peer.initialize(root)
        wait_for_index(peer)
        for name, text in big_files().items():
            path = root / name
            path.write_text(text)
            probe = HoverProbe(peer, (root / "good.py").as_uri())
            language = "python" if name.endswith(".py") else "json"
            item = {"uri": path.as_uri(), "languageId": language, "version": 1, "text": text}
            peer.notify("textDocument/didOpen", {"textDocument": item})
            for method in ("textDocument/codeLens", "jaxlsp/discover"):
                if method == "jaxlsp/discover" and name in LONG_ANSWERS:
                    # a 3.7 MB answer (10,000 items: jaxlsp/discover is not bounded) is
                    # serialised in one piece, 0.7-1.4 s: not what this test bounds
                    worst[name] = probe.stop()
                answers[f"{name} {method}"] = peer.wait(
                    peer.start(method, {"textDocument": {"uri": path.as_uri()}}), 300
                )
            if name not in LONG_ANSWERS:
                worst[name] = probe.stop()
            peer.notify("textDocument/didClose", {"textDocument": {"uri": path.as_uri()}})
        record(big_files_worst_hover_s={k: round(v, 3) for k, v in worst.items()})
        for key, reply in answers.items():
            assert reply.get("error", {}).get("code") != INTERNAL_ERROR, (key, reply)
        assert all(v <= WORST_HOVER for v in worst.values()), worst

        said = diagnostics(peer)
        for name, reason in {
            "literal.py": "the statement has more than 10,000 tokens",
            "decorators.py": "the statement has more than 10,000 tokens",
            "nested.py": "classes nest more than 20 deep",
            "statements.py": "the file has more than 10,000 top-level statements",
            "functions.py": "the file has more than 10,000 top-level statements",
            "deep.ipynb": "its JSON nests too deep",
        }.items():
            found = said.get((root / name).as_uri(), [])
            assert any(reason in d["message"] and d["code"] == "not-analysed" for d in found), (name, found)
        assert lens_names(peer, (root / "literal.py").as_uri()) == ["f"]  # the rest of the file counts

        lenses = answers["functions.py textDocument/codeLens"]["result"]
        assert len(lenses) == 2001  # MAX_LENS_ENTRIES, then one that says what was left out
        # the first 10,000 statements are summarised (budget.MAX_STATEMENTS): 9,998 functions
        assert lenses[-1]["command"]["title"].startswith("jaxlsp: 7,998 more entrypoints here get no lens")
        # discover lists the first 2,000 and says how many there are (issue 25: it answered 9,998)
        for name in ("functions.py", "cells.ipynb"):  # the notebook as functions.py
            found = answers[f"{name} jaxlsp/discover"]["result"]
            assert len(found["entrypoints"]) == 2_000, name
            assert found["truncated"] == {"entrypoints": 9_998, "drivers": 0, "limit": 2_000}, name
        assert peer.alive()
    finally:
        code = peer.close()
    assert code == 0, peer.stderr.decode(errors="replace")[-2000:]
    assert not sentinel.exists(), sentinel.read_text()


def test_sixteen_thousand_watched_file_changes_never_hold_the_loop(tmp_path: Path) -> None:
    """A branch switch's worth of changes in one notification: 1,000 files, each named 16 times
    (the handler read and summarised every change on the loop: 2.9 s measured before issue 25)."""
    root, _ = untrusted_workspace(tmp_path)
    (root / "good.py").write_text(HEADER.format(name="good", body="jnp.tanh(x)"))
    for i in range(1000):
        (root / f"m{i}.py").write_text(HEADER.format(name=f"m{i}", body=f"jnp.sin(x) * {i}"))
    peer = Peer(env=server_env())
    try:
        peer.initialize(root)
        wait_for_index(peer, 120)
        probe = HoverProbe(peer, (root / "good.py").as_uri())
        changes = [{"uri": (root / f"m{i % 1000}.py").as_uri(), "type": 2} for i in range(16_000)]
        peer.notify("workspace/didChangeWatchedFiles", {"changes": changes})
        assert lens_names(peer, (root / "m7.py").as_uri()) == ["m7"]  # answered after the changes
        time.sleep(0.5)  # the probe keeps sampling while the changes may still be handled
        worst = probe.stop()
        record(watched_files_16000_worst_hover_s=round(worst, 3))
        assert worst <= WATCHED_WORST_HOVER, worst
        assert peer.alive()
    finally:
        assert peer.close() == 0
