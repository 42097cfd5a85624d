"""Idle RSS of ``jaxlsp serve`` after indexing a workspace of a few hundred files (bar: 120 MB).

The workspace is a copy of the installed flax, equinox and optax sources (real JAX code, larger
files than most projects). The script speaks LSP over pipes, waits for the indexing progress to
end, asks for lenses on one file, then reads the server's VmRSS from /proc. Linux only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LIMIT_MB = 120.0
PACKAGES = ("flax", "equinox", "optax")


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # finds the folder without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{name} is not installed: run `make install` first")
    return Path(next(iter(spec.submodule_search_locations)))


class LspError(Exception):
    pass


class Peer:
    """A minimal LSP client over the server's stdin/stdout; server->client requests get null."""

    def __init__(self, command: list[str], cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        message: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        return message

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == self.next_id and "method" not in message:
                if "error" in message:
                    raise LspError(f"{method}: {message['error']}")
                return message.get("result")
            self.answer(message)

    def timed(self, method: str, params: Any) -> tuple[float, Any]:
        start = time.perf_counter()
        result = self.request(method, params)
        return time.perf_counter() - start, result

    def answer(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # a server->client request: accept it
            self.send({"id": message["id"], "result": None})

    def wait_for_progress_end(self) -> None:
        while True:
            message = self.receive()
            self.answer(message)
            value = message.get("params", {}).get("value", {}) if message.get("method") == "$/progress" else {}
            if value.get("kind") == "end":
                return


def status_mb(pid: int, key: str = "VmRSS") -> float:
    """A memory figure of ``/proc/<pid>/status`` (VmRSS, VmHWM...) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key}")


def measure(workspace: Path) -> tuple[int, float]:
    files = sum(1 for _ in workspace.rglob("*.py"))
    peer = Peer([sys.executable, "-m", "jaxlsp", "serve"])
    try:
        caps = {"window": {"workDoneProgress": True}, "workspace": {"codeLens": {"refreshSupport": False}}}
        peer.request(
            "initialize",
            {"processId": None, "rootUri": workspace.as_uri(), "capabilities": caps, "workspaceFolders": None},
        )
        peer.send({"method": "initialized", "params": {}})
        peer.wait_for_progress_end()
        some_file = next(workspace.rglob("linear.py"))
        peer.request("textDocument/codeLens", {"textDocument": {"uri": some_file.as_uri()}})
        rss = status_mb(peer.proc.pid)
        peer.request("shutdown", None)
        peer.send({"method": "exit", "params": None})
        peer.proc.wait(timeout=10)
        return files, rss
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()


def main() -> int:
    argparse.ArgumentParser(description=__doc__).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        for name in PACKAGES:
            shutil.copytree(package_dir(name), workspace / name, ignore=shutil.ignore_patterns("__pycache__"))
        files, rss = measure(workspace)
    ok = rss <= LIMIT_MB
    verdict = "ok" if ok else "OVER"
    print(f"server idle RSS {rss:.1f} MB after indexing {files} files (bar <= {LIMIT_MB:.0f} MB): {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
