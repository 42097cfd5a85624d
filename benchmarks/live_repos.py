"""Live shapes on real repositories: how many lines show a shape on hover after only opening files.

    python benchmarks/live_repos.py REPO [REPO ...] [--settle S] [--json OUT]

For each repository folder (a checkout with its own ``.venv``, which the server picks once the
folder is trusted): ``jaxlsp discover REPO --json`` lists the targets (static, no code runs), then
one ``jaxlsp serve`` on the folder, trusted, live shapes on (the default), gets a ``didOpen`` of
every ``.py`` file that defines a target and nothing else: no trace request, no save, no answer to
any question. Once ``jaxlsp/liveStatus`` has settled (nothing queued or tracing, for a few seconds
of quiet) or ``--settle`` seconds passed, every line inside each target's body is hovered, and a
line counts when its hover shows a traced type (``f32[8,64]``).

Per repository: files opened, targets, their final live states (fresh, failed, not live, and
those still queued or tracing at the deadline), the lines with a shape over the body lines (all
bodies, and the bodies of fresh targets), the not-live and failure reasons by count, and every
``shape-contract`` diagnostic with its file, line and message, to be judged by reading the code.
Notebooks are left out: they are never traced live.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

SHAPE = re.compile(r"\b(?:[fiuc]\d+|bf16|bool|key<\w+>)\[[0-9,]*\]")
QUIET = 5.0  # seconds without a message before a settled liveStatus is believed
BUSY = {"queued", "tracing"}


class Client:
    """An LSP client over the server's pipes: a reader thread queues every message, so waits
    have deadlines; server->client requests get a null result."""

    def __init__(self, command: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        self.live: list[dict[str, Any]] = []
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}
        self.last_message = time.monotonic()
        self.timeline: dict[str, list[tuple[float, str]]] = {}  # target -> (time, state) at each change
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.inbox.put(json.loads(out.read(length)))

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def _take(self, timeout: float) -> dict[str, Any] | None:
        try:
            message = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            raise SystemExit("the server closed its output")
        self.last_message = time.monotonic()
        method = message.get("method")
        if method is not None and "id" in message:
            self.send({"id": message["id"], "result": None})
        elif method == "jaxlsp/liveStatus":
            self.live.append(message["params"])
            now = time.monotonic()
            for target in message["params"]["targets"]:
                key = f"{target['uri']}::{target['name']}"
                if self.timeline.get(key, [(0.0, "")])[-1][1] != target["state"]:
                    self.timeline.setdefault(key, []).append((now, target["state"]))
        elif method == "textDocument/publishDiagnostics":
            self.diagnostics[message["params"]["uri"]] = message["params"]["diagnostics"]
        return message

    def request(self, method: str, params: Any, timeout: float = 120.0) -> Any:
        self.next_id += 1
        ident = self.next_id
        self.send({"id": ident, "method": method, "params": params})
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            message = self._take(max(end - time.monotonic(), 0.01))
            if message is not None and message.get("id") == ident and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result")
        raise TimeoutError(f"{method} got no answer in {timeout} s")

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._take(max(end - time.monotonic(), 0.01))

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.proc.wait(timeout=30)
        except (TimeoutError, RuntimeError, SystemExit, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def discover(root: Path) -> list[dict[str, Any]]:
    """``jaxlsp discover ROOT --json``: every target, with absolute paths."""
    jaxlsp = Path(sys.executable).with_name("jaxlsp")
    proc = subprocess.run(
        [str(jaxlsp), "discover", str(root), "--json"], capture_output=True, text=True, timeout=600, check=True
    )
    items: list[dict[str, Any]] = json.loads(proc.stdout)
    for item in items:
        item["path"] = str((root / item["path"]).resolve()) if not Path(item["path"]).is_absolute() else item["path"]
    return items


def settled(client: Client) -> bool:
    if not client.live:
        return False
    latest = client.live[-1]
    return not any(t["state"] in BUSY for t in latest["targets"]) and time.monotonic() - client.last_message > QUIET


def measure(root: Path, settle: float) -> dict[str, Any]:
    root = root.resolve()
    started = time.monotonic()
    targets = [t for t in discover(root) if t["path"].endswith(".py")]
    files = sorted({t["path"] for t in targets})
    with tempfile.TemporaryDirectory(prefix="jaxlsp-live-repos-") as cwd:
        client = Client([sys.executable, "-m", "jaxlsp", "serve"], cwd=Path(cwd))
        try:
            client.request(
                "initialize",
                {
                    "processId": os.getpid(),
                    "rootUri": root.as_uri(),
                    "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                    "capabilities": {
                        "textDocument": {
                            "hover": {"contentFormat": ["markdown"]},
                            "synchronization": {"didSave": True},
                            "publishDiagnostics": {"codeDescriptionSupport": True},
                        }
                    },
                    "initializationOptions": {"jaxlsp": {"trusted": True, "liveShapes": True}},
                },
            )
            client.notify("initialized", {})
            texts: dict[str, list[str]] = {}
            for file in files:
                text = Path(file).read_text(encoding="utf-8", errors="replace")
                texts[file] = text.splitlines()
                client.notify(
                    "textDocument/didOpen",
                    {"textDocument": {"uri": Path(file).as_uri(), "languageId": "python", "version": 1, "text": text}},
                )
            opened = time.monotonic()
            shown_counts: dict[str, int] = {}
            while time.monotonic() - opened < settle and not settled(client):
                client.pump(1.0)
                now = dict(Counter(t["state"] for t in client.live[-1]["targets"])) if client.live else {}
                if now != shown_counts:  # progress on stderr: the states so far
                    shown_counts = now
                    print(f"{root.name} {time.monotonic() - opened:6.0f} s: {now}", file=sys.stderr, flush=True)
            settle_s = time.monotonic() - opened
            final = client.live[-1] if client.live else {"targets": [], "started": 0}
            states = {(t["uri"], t["name"]): t for t in final["targets"]}

            # Hover every code line of each body once (nested targets share lines): which show a shape.
            lines: dict[tuple[str, int], bool] = {}
            owners: dict[tuple[str, int], set[str]] = {}
            bodies = {file: code_lines("\n".join(text)) for file, text in texts.items()}
            for target in targets:
                uri = Path(target["path"]).as_uri()
                state = states.get((uri, target["name"]), {}).get("state", "unlisted")
                body = bodies[target["path"]].get(int(target["line"]))
                if body is None:  # not a def/class ast knows at that line: every line after it
                    body = list(range(int(target["line"]), int(target["end_line"])))
                for line in body:
                    key = (target["path"], line)
                    owners.setdefault(key, set()).add(state)
                    if key in lines:
                        continue
                    text = texts[target["path"]][line] if line < len(texts[target["path"]]) else ""
                    if not text.strip() or text.strip().startswith("#"):
                        continue
                    indent = len(text) - len(text.lstrip())
                    shown = client.request(
                        "textDocument/hover",
                        {"textDocument": {"uri": uri}, "position": {"line": line, "character": indent}},
                    )
                    value = shown["contents"]["value"] if isinstance(shown, dict) else ""
                    lines[key] = bool(SHAPE.search(value))
            hovered_s = time.monotonic() - opened - settle_s
            client.pump(1.0)
            contracts = [
                {
                    "path": _relative(uri, root),
                    "line": d["range"]["start"]["line"] + 1,
                    "message": d["message"],
                }
                for uri, found in sorted(client.diagnostics.items())
                for d in found
                if d.get("code") == "shape-contract"
            ]
            other = Counter(
                str(d.get("code"))
                for found in client.diagnostics.values()
                for d in found
                if d.get("source") == "jaxlsp" and d.get("code") != "shape-contract"
            )
        finally:
            client.close()
    counts = Counter(t["state"] for t in final["targets"])
    fresh_lines = [k for k, owners_ in owners.items() if "fresh" in owners_ and k in lines]
    reasons = Counter(
        (t["state"], _short(t.get("reason", ""))) for t in final["targets"] if t["state"] in ("failed", "notLive")
    )
    return {
        "repo": root.name,
        "files_opened": len(files),
        "targets": len(targets),
        "listed": len(final["targets"]),
        "states": dict(counts),
        "live_traces_started": final.get("started", 0),
        "settle_seconds": round(settle_s, 1),
        "settled": not any(t["state"] in BUSY for t in final["targets"]),
        "hover_seconds": round(hovered_s, 1),
        "body_lines": len(lines),
        "lines_with_shape": sum(lines.values()),
        "fresh_body_lines": len(fresh_lines),
        "fresh_lines_with_shape": sum(lines[k] for k in fresh_lines),
        "fresh_misses": [
            f"{os.path.relpath(path, root)}:{line + 1}: {texts[path][line].strip()[:100]}"
            for path, line in sorted(fresh_lines)
            if not lines[(path, line)]
        ][:80],
        "fresh_targets": sorted(t["name"] for t in final["targets"] if t["state"] == "fresh"),
        "reasons": [{"state": s, "reason": r, "count": n} for (s, r), n in reasons.most_common()],
        "failed": [
            {"name": t["name"], "path": _relative(t["uri"], root), "reason": t.get("reason", "")}
            for t in final["targets"]
            if t["state"] == "failed"
        ],
        "shape_contracts": contracts,
        "other_diagnostics": dict(other),
        "wall_seconds": round(time.monotonic() - started, 1),
        "slowest": _slowest(client.timeline, root),
    }


def _slowest(timeline: dict[str, list[tuple[float, str]]], root: Path, count: int = 10) -> list[dict[str, Any]]:
    """The targets that spent longest tracing (a not-live verdict counts: finding out takes time too)."""
    spans = []
    for key, changes in timeline.items():
        for (at, state), (end, after) in itertools.pairwise(changes):
            if state == "tracing":
                uri, _, name = key.rpartition("::")
                spans.append(
                    {"target": f"{_relative(uri, root)}::{name}", "seconds": round(end - at, 1), "then": after}
                )
    return sorted(spans, key=lambda s: -float(s["seconds"]))[:count]


def code_lines(source: str) -> dict[int, list[int]]:
    """Per ``def``/``class`` (by its 1-based keyword line, as discovery gives it): the 0-based
    lines of its body, without docstrings (a string alone as a statement, at any depth)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            docstrings.update(range(node.lineno - 1, (node.end_lineno or node.lineno)))
    found: dict[int, list[int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            span = range(node.body[0].lineno - 1, node.end_lineno or node.body[-1].lineno)
            found[node.lineno] = [line for line in span if line not in docstrings]
    return found


def _relative(uri: str, root: Path) -> str:
    return os.path.relpath(unquote(uri.removeprefix("file://")), root)


def _short(reason: str) -> str:
    """A reason without its per-target details (names, paths, numbers), to count alike ones together."""
    first = reason.split("\n", 1)[0]
    first = re.sub(r"\(profiles\.[^)]*\)", "(profiles.…)", first)
    first = re.sub(r"`[^`]*`", "`…`", first)
    return first[:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--settle", type=float, default=1200.0, help="seconds to wait for live traces to settle")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    results = []
    for repo in args.repos:
        result = measure(repo, args.settle)
        results.append(result)
        print(json.dumps(result, indent=1), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
