"""Security through the real server: an untrusted workspace runs nothing (a sentinel interpreter
in its ``.venv`` proves it), the trust store cannot be written from a workspace, recipe targets
cannot reach outside the workspace, and the viewer's HTTP server is loopback only, demands its
token, serves no file outside its assets, allows no cross-origin reads and stops with the server.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, RpcError, record, server_env, untrusted_workspace

CLAIMS = {"trusted": True, "python": ".venv/bin/python", "jaxlsp.trusted": True}


def test_an_untrusted_workspace_runs_nothing(peer_factory: Any, tmp_path: Path) -> None:
    root, sentinel = untrusted_workspace(tmp_path)
    env = server_env()
    peer: Peer = peer_factory(env=env)
    # Every place a workspace can speak claims trust: its files (.vscode/settings.json and
    # jaxlsp.toml are in the fixture) and workspace/configuration answers.
    peer.answers["workspace/configuration"] = lambda params: [CLAIMS for _ in params.get("items", [])]
    peer.initialize(root, options={"python": str(root / ".venv" / "bin" / "python")})
    uri = peer.open(root / "model.py")
    position = {"line": 9, "character": 8}
    assert [e["name"] for e in peer.call("jaxlsp/discover", {"textDocument": {"uri": uri}})["entrypoints"]] == [
        "predict",
        "MLP",
    ]
    assert len(peer.call("textDocument/codeLens", {"textDocument": {"uri": uri}})) == 2
    peer.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": position})
    peer.call(
        "textDocument/inlayHint",
        {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 20, "character": 0}},
        },
    )
    actions = peer.call(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": {"start": position, "end": position}, "context": {"diagnostics": []}},
    )
    assert actions, "the trace action is offered (running it asks for trust)"
    peer.notify("workspace/didChangeConfiguration", {"settings": {"jaxlsp": CLAIMS}})
    for method, params in [
        ("jaxlsp/environment", {"textDocument": {"uri": uri}, "name": "predict"}),
        (
            "workspace/executeCommand",
            {"command": "jaxlsp.checkEnvironment", "arguments": [{"uri": uri, "name": "predict"}]},
        ),
        ("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict", "profile": "predict"}),
        ("workspace/executeCommand", {"command": "jaxlsp.traceGraph", "arguments": [{"uri": uri, "name": "MLP"}]}),
    ]:
        with pytest.raises(RpcError) as info:
            peer.call(method, params)
        assert "trust" in info.value.message, (method, info.value.message)
    prompts = [m for m in peer.server_requests if m["method"] == "window/showMessageRequest"]
    assert prompts, "tracing an untrusted workspace must ask the user"
    # Nothing ran: not the workspace's interpreter, not a spare, not an environment check.
    assert peer.alive()
    assert peer.descendants() == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in peer.descendants()]
    assert not sentinel.exists(), sentinel.read_text()
    # ...and nothing the workspace said reached the user's trust store.
    assert peer.call("workspace/executeCommand", {"command": "jaxlsp.listTrusted", "arguments": []}) == []
    assert not (Path(env["XDG_CONFIG_HOME"]) / "jaxlsp" / "trusted.json").exists()
    record(**{"security.untrusted": "no process started, sentinel interpreter never ran, trust store untouched"})


def test_trust_once_is_not_kept_and_the_store_lives_outside_the_workspace(peer_factory: Any, tmp_path: Path) -> None:
    root, _sentinel = untrusted_workspace(tmp_path)
    env = server_env()
    peer: Peer = peer_factory(env=env)
    peer.answers["window/showMessageRequest"] = lambda params: {"title": "Trust once"}
    peer.initialize(root)
    peer.call("workspace/executeCommand", {"command": "jaxlsp.revokeTrust", "arguments": [str(root)]})
    assert peer.call("workspace/executeCommand", {"command": "jaxlsp.listTrusted", "arguments": []}) == []
    assert not (Path(env["XDG_CONFIG_HOME"]) / "jaxlsp" / "trusted.json").exists()
    assert not any(p.name == "trusted.json" for p in root.rglob("*"))


ESCAPES = """version = 1

[profiles.up]
target = "../outside/evil.py::f"
inputs.args = [{ kind = "array", shape = [3] }]

[profiles.absolute]
target = "OUTSIDE/evil.py::f"
inputs.args = [{ kind = "array", shape = [3] }]

[profiles.link]
target = "link.py::f"
inputs.args = [{ kind = "array", shape = [3] }]

[profiles.linked_dir]
target = "linked/evil.py::f"
inputs.args = [{ kind = "array", shape = [3] }]
"""
FACTORY = """version = 1

[profiles.factory]
target = "model.py::f"
inputs = { factory = "../outside/evil:f" }
"""


def escaping_workspace(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    sentinel = tmp_path / "EVIL-ran"
    (outside / "evil.py").write_text(f"open({str(sentinel)!r}, 'a').write('imported')\n\n\ndef f(x):\n    return x\n")
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    for folder in (root, root / "sub"):
        (folder / "model.py").write_text("def f(x):\n    return x\n")
    (root / "link.py").symlink_to(outside / "evil.py")
    (root / "linked").symlink_to(outside)
    (root / "jaxlsp.toml").write_text(ESCAPES.replace("OUTSIDE", str(outside)))
    (root / "sub" / "jaxlsp.toml").write_text(FACTORY)
    return root, sentinel


def test_recipe_targets_and_factories_cannot_escape_the_workspace(peer_factory: Any, tmp_path: Path) -> None:
    """With the editor's trust for the workspace (not for anything outside it), no recipe path,
    symlink or factory makes the server import a file outside the workspace."""
    root, sentinel = escaping_workspace(tmp_path)
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root, options={"trusted": True, "liveShapes": False})
    for file, profile, expected in [
        ("model.py", "up", "profiles.up.target"),  # names the key: the profile is for another file
        ("model.py", "absolute", "profiles.absolute.target"),
        ("sub/model.py", "factory", "profiles.factory.inputs.factory"),  # a factory is a dotted name, never a path
        ("link.py", "link", "not trusted"),  # the symlink resolves outside: the editor's trust does not reach it
        ("linked/evil.py", "linked_dir", "not trusted"),
        ("../outside/evil.py", "up", "not trusted"),  # the outside file itself, named by the client
    ]:
        uri = (root / file).resolve().as_uri() if file.startswith("..") else (root / file).as_uri()
        with pytest.raises(RpcError) as info:
            peer.call(
                "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": profile}, timeout=scaled(60)
            )
        assert expected in info.value.message, (profile, info.value.message)
    prompts = [m["params"]["message"] for m in peer.server_requests if m["method"] == "window/showMessageRequest"]
    assert prompts and all(str(tmp_path / "outside") in p for p in prompts), prompts
    assert not sentinel.exists(), "code outside the workspace ran"
    assert peer.alive()


# -- the viewer's HTTP server ---------------------------------------------------------------------


def _get(port: int, target: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(10))
    try:
        conn.request("GET", target, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
    finally:
        conn.close()


def test_the_viewer_is_loopback_only_token_bound_and_stops_with_the_server(peer_factory: Any, tmp_path: Path) -> None:
    pytest.importorskip("jax")
    root = tmp_path / "viewer"
    root.mkdir()
    (root / "model.py").write_text("import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.sin(x)\n")
    (root / "jaxlsp.toml").write_text(
        'version = 1\n\n[profiles.f]\ntarget = "model.py::f"\ninputs.args = [{ kind = "array", shape = [3] }]\n'
    )
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root, options={"trusted": True, "liveShapes": False})
    uri = peer.open(root / "model.py")
    trace_id = peer.call(
        "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": "f"}, timeout=scaled(120)
    )["traceId"]
    url = urllib.parse.urlsplit(peer.call("jaxlsp/openGraph", {"traceId": trace_id})["url"])
    query = urllib.parse.parse_qs(url.query)
    token, port = query["token"][0], url.port
    assert url.hostname == "127.0.0.1" and port is not None and len(token) >= 32

    # Bound to loopback only: no other local address answers.
    others = [addr for addr in _local_addresses() if not addr.startswith("127.")]
    for addr in others:
        with pytest.raises(OSError), socket.create_connection((addr, port), timeout=scaled(2)):
            pass

    graph = f"/graph?token={token}&trace={trace_id}"
    status, _, body = _get(port, graph)
    assert status == 200 and json.loads(body)
    for target in (
        f"/graph?trace={trace_id}",
        f"/graph?token={'0' * len(token)}&trace={trace_id}",
        f"/graph?token=&trace={trace_id}",
        f"/events?trace={trace_id}",
    ):
        assert _get(port, target)[0] == 403, target
    # No path traversal: nothing outside the viewer's own assets is served, token or not.
    for target in (
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/..%2f..%2f..%2fetc%2fpasswd",
        "/static/../../jaxlsp/trust_store.py",
        "//etc/passwd",
    ):
        for suffix in ("", f"?token={token}"):
            status, _, body = _get(port, target + suffix)
            assert b"root:" not in body and b"TrustStore" not in body, target
            assert status in (400, 403, 404), (target, status)
    # No cross-origin reads: no CORS grant to another origin, even with the token.
    status, headers, _ = _get(port, graph, {"Origin": "http://evil.example"})
    assert headers.get("access-control-allow-origin") in (None, f"http://127.0.0.1:{port}"), headers
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(10))
    conn.request("OPTIONS", graph, headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    preflight = conn.getresponse()
    assert (preflight.getheader("Access-Control-Allow-Origin") or "") in ("", f"http://127.0.0.1:{port}")
    conn.close()

    peer.close()  # shutdown + exit: the viewer goes with the server
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=scaled(2)):
        pass


def _local_addresses() -> list[str]:
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)})
    except OSError:
        return []


def test_editor_trust_with_no_folders_asks_for_the_files_folder(peer_factory: Any, tmp_path: Path) -> None:
    """``trusted: true`` covers the client's workspace folders; with none, nothing is covered."""
    root, sentinel = untrusted_workspace(tmp_path)
    peer: Peer = peer_factory(env=server_env())
    peer.call(
        "initialize",
        {
            "processId": None,
            "rootUri": None,
            "capabilities": {},
            "initializationOptions": {"jaxlsp": {"trusted": True, "liveShapes": False}},
        },
    )
    peer.notify("initialized", {})
    uri = peer.open(root / "model.py")
    with pytest.raises(RpcError) as info:
        peer.call("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "predict"})
    assert "trust" in info.value.message
    prompts = [m["params"]["message"] for m in peer.server_requests if m["method"] == "window/showMessageRequest"]
    assert prompts and str(root) in prompts[0], prompts
    assert peer.descendants() == []
    assert not sentinel.exists()


ENV_PROBE = """import json, os, tempfile
import jax.numpy as jnp

TMP = tempfile.gettempdir()
open(os.path.join(TMP, "left-behind.txt"), "w").write("user code wrote this")
json.dump({"keys": sorted(os.environ), "tmp": TMP, "named": os.environ.get("MY_SETTING")},
          open(os.environ["JAXLSP_CAPTURE_PROBE_OUT"], "w"))


def f(x):
    return jnp.sin(x)
"""


def test_the_worker_gets_an_allow_listed_environment_and_its_own_tmpdir(peer_factory: Any, tmp_path: Path) -> None:
    pytest.importorskip("jax")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "probe.py").write_text(ENV_PROBE)
    (root / "jaxlsp.toml").write_text(
        'version = 1\n[profiles.f]\ntarget = "probe.py::f"\nenv = ["MY_SETTING", "NOT_SET_ANYWHERE"]\n'
        'inputs.args = [{ kind = "array", shape = [3] }]\n'
    )
    out = tmp_path / "probe.json"
    env = server_env(
        GITHUB_TOKEN="ghp-secret", AWS_SECRET_ACCESS_KEY="aws-secret", MY_SETTING="given",
        JAX_PLATFORMS="cpu", JAXLSP_CAPTURE_PROBE_OUT=str(out),
    )  # fmt: skip
    peer: Peer = peer_factory(env=env)
    peer.initialize(root, options={"trusted": True, "liveShapes": False})
    uri = peer.open(root / "probe.py")
    result = peer.call("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": "f"}, timeout=scaled(120))
    assert result["traceId"]
    seen = json.loads(out.read_text())
    assert "GITHUB_TOKEN" not in seen["keys"] and "AWS_SECRET_ACCESS_KEY" not in seen["keys"], seen["keys"]
    assert {"PATH", "HOME", "JAX_PLATFORMS", "TMPDIR"} <= set(seen["keys"]), seen["keys"]
    assert seen["named"] == "given" and "NOT_SET_ANYWHERE" not in seen["keys"]
    assert "jaxlsp-capture-" in seen["tmp"], seen["tmp"]
    assert not Path(seen["tmp"]).exists(), "the worker's temporary folder outlived the capture"
