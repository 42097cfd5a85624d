"""The viewer bridge cannot starve the server of descriptors (issue 25, item 6).

Anyone on the machine can connect to the bridge's port without its token. 1,100 idle connections
once took every descriptor of a server under the usual soft limit of 1,024: ``codeLens`` answered
``[]``, ``jaxlsp/discover`` nothing and traces "Too many open files". Now the bridge holds at most
64 connections, each for 5 s before its request line, and refuses new ones within a reserve of
descriptors; the server raises its soft limit toward the hard one at start.
"""

from __future__ import annotations

import resource
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, record, server_env

CONNECTIONS = 1100
USUAL_LIMIT = 1024


def test_1100_idle_bridge_connections_leave_lenses_discovery_and_traces_working(
    peer_factory: Any, tmp_path: Path
) -> None:
    pytest.importorskip("jax")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < CONNECTIONS + 200:
        pytest.skip(f"this process may open at most {hard} descriptors")
    if soft != resource.RLIM_INFINITY and soft < CONNECTIONS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (CONNECTIONS + 200, hard))
    root = tmp_path / "ws"
    root.mkdir()
    (root / "model.py").write_text("import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.sin(x)\n")
    (root / "jaxlsp.toml").write_text(
        'version = 1\n\n[profiles.f]\ntarget = "model.py::f"\ninputs.args = [{ kind = "array", shape = [4] }]\n'
    )
    peer: Peer = peer_factory(env=server_env(), open_files=USUAL_LIMIT)
    peer.initialize(root, options={"trusted": True, "liveShapes": False})
    uri = peer.open(root / "model.py")
    first = peer.call("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": "f"}, timeout=scaled(180))
    url = urlsplit(peer.call("jaxlsp/openGraph", {"traceId": first["traceId"]})["url"])
    assert url.hostname == "127.0.0.1" and url.port is not None

    sockets: list[socket.socket] = []
    started = time.monotonic()
    try:
        for _ in range(CONNECTIONS):
            try:
                sockets.append(socket.create_connection(("127.0.0.1", url.port), timeout=scaled(5)))
            except OSError:  # the listen queue was full for a moment: the flood is what matters
                continue
        opened = time.monotonic() - started
        lenses = peer.call("textDocument/codeLens", {"textDocument": {"uri": uri}})
        assert lenses, "codeLens answered [] with the bridge flooded"
        found = peer.call("jaxlsp/discover", {"textDocument": {"uri": uri}})
        assert [e["name"] for e in found["entrypoints"]] == ["f"], found
        again = peer.call(
            "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": "f"}, timeout=scaled(180)
        )
        assert again["summary"]["ops"] == first["summary"]["ops"]
        held = len([s for s in sockets if _still_open(s)])
    finally:
        for s in sockets:
            s.close()
    record(
        **{
            "bridge.flood.connections": len(sockets),
            "bridge.flood.held_by_server": held,
            "bridge.flood.open_seconds": round(opened, 2),
        }
    )
    assert held <= 64, f"the server kept {held} idle connections open"
    assert peer.alive()


def _still_open(s: socket.socket) -> bool:
    """Whether the server has not closed this connection (a read would block, no EOF or reset)."""
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
