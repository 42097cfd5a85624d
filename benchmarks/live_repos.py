"""Live shapes on real repositories: how many lines show a shape on hover after only opening files,
and after one ``jaxlsp.learnShapes`` (issue 46).

    python benchmarks/live_repos.py [REPO ...] [--settle S] [--budget S] [--no-learn] [--json OUT]
                                    [--open-wait S] [--open-files N] [--no-pytest]
                                    [--open-only PREVIOUS_JSON --calls-cache DIR]

For each repository folder (a checkout; its own ``.venv`` when it has one, which the server picks
once the folder is trusted; with no REPO, every folder in ``build/live-repos/``, and nothing to do
when there is none): ``jaxlsp discover REPO --json`` lists the targets (static, no code runs).

*Which targets the repository calls*: each example ``jaxlsp learn`` would run (the test files and
the scripts the docs run) is run once in the repository's interpreter, outside jaxlsp, with a trace
function that notes every workspace function and ``__call__`` that starts (``calls``). This does
not use the signature hooks, so a call they fail to record still counts. Test functions
(``test*`` in a test file) are discovered as targets too, but pytest calls them, not the
repository: they are counted apart (``test_functions``).

Then one ``jaxlsp serve`` on the folder, trusted, live shapes on, its per-user cache in a fresh
folder (nothing learned before), gets a ``didOpen`` of every ``.py`` file that defines a target and
nothing else. Once ``jaxlsp/liveStatus`` has settled (nothing queued or tracing, for a few seconds
of quiet) or ``--settle`` seconds passed, every line inside each target's body is hovered, and a
line counts when its hover shows a traced type (``f32[8,64]``): the *before* figures. Then one
``workspace/executeCommand jaxlsp.learnShapes`` on the folder (its wall time and summary), every
file closed and opened again, settled and hovered again: the *after* figures.

Per repository: targets discovered and called, fresh before and after (of all, and of those called),
lines with a shape over the body lines before and after (all bodies, and the called targets'), the
learn run's wall time and example outcomes, every called target still dark after learning with its
state and reason, the not-live and failure reasons by count, and every ``shape-contract``
diagnostic with its file, line and message, to be judged by reading the code. Notebooks are left
out: they are never traced live.

Issue 56's figures, beside those: before and after (``operations``), of the fresh targets' body
lines those that *hold a JAX operation* (a node of some fresh target's newest graph, every group
paged through with ``jaxlsp/graph``, has that line as its source frame) and how many of them show
a shape, and how many dimensions are shown symbolically (string dimensions in those graphs'
values, their names, and the hovered lines showing one). Just before the learn, the repository's
own ``python -m pytest`` over the same test files in the same interpreter (``own_pytest``), and
the learn's wall time over it (``learn_over_pytest``, bar 1.2; ``--no-pytest`` skips it). After
the measured server, each file that defines a target the repository calls is opened alone in a
fresh server and per-user cache with ``learn.onOpen`` ``"on"`` (``open_learn``): the seconds until
all its called targets are fresh at once, and their median (bar 60 s; ``--open-wait S`` per file,
0 skips it; ``--open-files N`` the first N files); beside it the seconds until those of them the
folder learn made fresh are (``seconds_learnable``: a target no learn makes fresh, a factory called
with Python values only, never is, however fast the learn), their median over the files that have
any, and when each target first turned fresh. ``--open-only PREVIOUS_JSON --calls-cache DIR`` runs
that part alone, the calls audit from the cache (run once when missing) and what a folder learn
makes fresh from a whole run's figures. Exits 1 when a repository has less than 80 % of the
targets it calls fresh after learning, or misses either of issue 56's bars.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

# A traced type on hover: ``f32[8,64]``, or with symbolic dimensions ``f32[batch,11,48]``, ``f32[b,32*t]``.
NO_SHAPE = "**jaxlsp** · no shape here"  # server/features/unshaped.py: a line that shows none, and why
SHAPE = re.compile(r"\b(?:[fiuc]\d+|bf16|bool|key<\w+>)\[[\w.,*+\- ]*\]")
# One whose dimensions include a name (JAX shape polymorphism): the dimension is shown symbolically.
SYMBOLIC = re.compile(r"\b(?:[fiuc]\d+|bf16|bool|key<\w+>)\[[\w.,*+\- ]*[A-Za-z_][\w.,*+\- ]*\]")
QUIET = 5.0  # seconds without a message before a settled liveStatus is believed
BUSY = {"queued", "tracing"}


class Client:
    """An LSP client over the server's pipes: a reader thread queues every message, so waits
    have deadlines; server->client requests get a null result."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        self.live: list[dict[str, Any]] = []
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}
        self.last_message = time.monotonic()
        self.timeline: dict[str, list[tuple[float, str]]] = {}  # target -> (time, state) at each change
        self.logs: list[tuple[float, str]] = []  # window/logMessage: a learn on open says its summary there
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

    def open(self, file: str | Path, text: str | None = None, version: int = 1) -> None:
        """``textDocument/didOpen`` of ``file`` (a Python file) with ``text``, by default the file's
        own, byte for byte as an editor sends it (lines joined again lose a final newline, and a
        trace's sources then read as changed: every uncovered line's hover said so)."""
        if text is None:
            text = Path(file).read_bytes().decode("utf-8", errors="replace")
        document = {"uri": Path(file).as_uri(), "languageId": "python", "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": document})

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
        elif method == "window/logMessage":
            self.logs.append((time.monotonic(), str(message["params"].get("message", ""))))
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


def start(root: Path, cache: Path, cwd: Path, learn_on_open: bool = False) -> Client:
    """``jaxlsp serve`` on ``root``, trusted, live shapes on, its per-user cache in ``cache`` (so
    that nothing learned before this run is used: the "before" is a first open); with
    ``learn_on_open``, ``learn.onOpen`` is ``"on"`` (no per-user choice is read then)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    options: dict[str, Any] = {"trusted": True, "liveShapes": True}
    if learn_on_open:
        options["learn"] = {"onOpen": "on"}
    client = Client([sys.executable, "-m", "jaxlsp", "serve"], cwd=cwd, env=env)
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
            "initializationOptions": {"jaxlsp": options},
        },
    )
    client.notify("initialized", {})
    return client


def wait_settled(client: Client, root: Path, settle: float, label: str) -> float:
    """Pump until ``jaxlsp/liveStatus`` settled or ``settle`` seconds passed; the seconds waited."""
    opened = time.monotonic()
    client.pump(min(QUIET, settle))  # the states a burst of opens queues arrive first
    shown_counts: dict[str, int] = {}
    while time.monotonic() - opened < settle and not settled(client):
        client.pump(1.0)
        now = dict(Counter(t["state"] for t in client.live[-1]["targets"])) if client.live else {}
        if now != shown_counts:  # progress on stderr: the states so far
            shown_counts = now
            print(f"{root.name} {label} {time.monotonic() - opened:6.0f} s: {now}", file=sys.stderr, flush=True)
    return time.monotonic() - opened


Snapshot = tuple[
    dict[tuple[str, str], dict[str, Any]],
    dict[tuple[str, int], bool],
    dict[tuple[str, int], set[str]],
    set[tuple[str, int]],
]


def snapshot(
    client: Client, targets: list[dict[str, Any]], texts: dict[str, list[str]], bodies: dict[str, dict[int, list[int]]]
) -> Snapshot:
    """The latest live state of each target, and for every code line of each body (nested
    targets share lines) whether its hover shows a traced type; the targets owning each line; the
    lines whose hover shows a dimension symbolically."""
    final = client.live[-1] if client.live else {"targets": []}
    states = {(t["uri"], t["name"]): t for t in final["targets"]}
    lines: dict[tuple[str, int], bool] = {}
    owners: dict[tuple[str, int], set[str]] = {}
    symbolic: set[tuple[str, int]] = set()
    for target in targets:
        uri = Path(target["path"]).as_uri()
        body = bodies[target["path"]].get(int(target["line"]))
        if body is None:  # not a def/class ast knows at that line: every line after it
            body = list(range(int(target["line"]), int(target["end_line"])))
        for line in body:
            key = (target["path"], line)
            owners.setdefault(key, set()).add(target_key(target))
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
            # a failed target's hover quotes JAX's message ("traced array with shape bool[]")
            lines[key] = not value.startswith(NO_SHAPE) and bool(SHAPE.search(value))
            if SYMBOLIC.search(value):
                symbolic.add(key)
    return states, lines, owners, symbolic


def graph_facts(client: Client, root: Path, trace_id: str) -> tuple[set[tuple[str, int]], list[list[Any]]]:
    """One graph, every group paged through (``jaxlsp/graph``): the (real path, 0-based line) each
    node's source frame points at, and the shape of each value a node makes (once per value)."""
    sources: set[tuple[str, int]] = set()
    shapes: dict[str, list[Any]] = {}
    pending: list[str | None] = [None]  # the top level, then each group found
    while pending:
        group = pending.pop()
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"traceId": trace_id, "limit": 5000}
            if group is not None:
                params["group"] = group
            if cursor is not None:
                params["cursor"] = cursor
            page = client.request("jaxlsp/graph", params)
            for item in page["items"]:
                if item["kind"] == "group":
                    pending.append(item["id"])
                    continue
                source = item.get("source") or {}
                if "path" in source and "line" in source and "cell" not in source:
                    sources.add((os.path.realpath(root / str(source["path"])), int(source["line"]) - 1))
                for value in item.get("outputs", []):
                    shapes.setdefault(str(value["id"]), list(value["shape"]))
            cursor = page.get("nextCursor")
            if not cursor:
                break
    return sources, list(shapes.values())


def operation_figures(
    client: Client,
    root: Path,
    targets: list[dict[str, Any]],
    snap: Snapshot,
) -> dict[str, Any]:
    """Of the fresh targets' body lines, those that hold a JAX operation, and how many of them show
    a shape; the dimensions the fresh graphs and the hovers show symbolically.

    A line holds a JAX operation when a node of some fresh target's newest graph has it as its
    source frame (the innermost workspace frame: a line that only calls a workspace helper holds
    none, the helper's lines do). Discovery's static knowledge is not used: what the graph says ran
    is what counts."""
    states, lines, owners, symbolic = snap
    fresh = {target_key(t) for t in targets if state_of(states, t)["state"] == "fresh"}
    traces = sorted(
        {
            str(state_of(states, t)["traceId"])
            for t in targets
            if target_key(t) in fresh and state_of(states, t).get("traceId")
        }
    )
    sources: set[tuple[str, int]] = set()
    shapes: list[list[Any]] = []
    missing = 0
    for trace_id in traces:
        try:
            found, values = graph_facts(client, root, trace_id)
        except (RuntimeError, TimeoutError):  # no longer kept: the store made room
            missing += 1
            continue
        sources |= found
        shapes += values
    held = [k for k, o in owners.items() if o & fresh and k in lines and k in sources]
    names = Counter(str(d) for shape in shapes for d in shape if isinstance(d, str))
    return {
        "fresh_op_lines": len(held),
        "fresh_op_lines_with_shape": sum(lines[k] for k in held),
        "fresh_op_line_share": round(sum(lines[k] for k in held) / len(held), 3) if held else None,
        "graphs": len(traces) - missing,
        "graphs_missing": missing,
        "values": len(shapes),
        "symbolic_values": sum(1 for shape in shapes if any(isinstance(d, str) for d in shape)),
        "symbolic_dims": sum(names.values()),
        "symbolic_names": dict(names.most_common(12)),
        "symbolic_hover_lines": len(symbolic),
    }


def open_learn(
    root: Path,
    files: list[str],
    wanted: dict[str, set[str]],
    wait: float,
    learnable: dict[str, set[str]] | None = None,
) -> dict[str, Any]:
    """Per file, a first open with ``learn.onOpen`` on: a fresh server and per-user cache each
    (nothing learned before, nothing cached), only that file opened; the seconds until every target
    of it the repository calls (``wanted[file]``, target names) is fresh at once in
    ``jaxlsp/liveStatus`` (``seconds``), and until every one of them that a folder learn makes
    fresh is (``learnable[file]``: ``seconds_learnable``; a file with none has no such figure). A
    file whose targets are not all fresh by ``wait`` seconds, or once its learn has said its summary
    and everything settled, has no seconds (counted as never in the median); the wait ends early
    once its learnable targets are all fresh (the others are dark after a whole folder learn)."""
    per_file: list[dict[str, Any]] = []
    for file in files:
        uri = Path(file).as_uri()
        names = wanted[file]
        can = names if learnable is None else learnable.get(file, set()) & names
        with (
            tempfile.TemporaryDirectory(prefix="jaxlsp-live-repos-") as cwd,
            tempfile.TemporaryDirectory(prefix="jaxlsp-live-repos-cache-") as cache,
        ):
            client = start(root, Path(cache), Path(cwd), learn_on_open=True)
            try:
                opened = time.monotonic()
                client.open(file)
                seconds: float | None = None
                seconds_learnable: float | None = None
                first_fresh: dict[str, float] = {}
                now: dict[str, str] = {}
                while time.monotonic() - opened < wait:
                    client.pump(0.5)
                    latest = client.live[-1]["targets"] if client.live else []
                    now = {t["name"]: t["state"] for t in latest if t["uri"] == uri and t["name"] in names}
                    at = time.monotonic() - opened
                    for name, st in now.items():
                        if st == "fresh":
                            first_fresh.setdefault(name, round(at, 1))
                    if can and seconds_learnable is None and all(now.get(name) == "fresh" for name in can):
                        seconds_learnable = at
                    if all(now.get(name) == "fresh" for name in names):
                        seconds = at
                        break
                    if seconds_learnable is not None and can != names:
                        break  # what a folder learn makes fresh is; the rest stays dark after one
                    if _learned_log(client) and settled(client):
                        break  # learned, traced again on it, and still not all fresh
                summary = _learned_log(client)
                per_file.append(
                    {
                        "file": os.path.relpath(file, root),
                        "called": len(names),
                        "learnable": len(can),
                        "fresh": sum(state == "fresh" for state in now.values()),
                        "seconds": None if seconds is None else round(seconds, 1),
                        "seconds_learnable": None if seconds_learnable is None else round(seconds_learnable, 1),
                        "first_fresh": first_fresh,
                        "learn": summary[:300] if summary else None,
                    }
                )
                print(f"{root.name} open {per_file[-1]}", file=sys.stderr, flush=True)
            finally:
                client.close()

    def median_of(key: str, files: list[dict[str, Any]]) -> float | None:
        ordered = sorted(math.inf if f[key] is None else float(f[key]) for f in files)
        found = statistics.median(ordered) if ordered else None
        return None if found is None or math.isinf(found) else round(found, 1)

    with_learnable = [f for f in per_file if f["learnable"]]
    return {
        "files": per_file,
        "median_seconds": median_of("seconds", per_file),
        "median_seconds_learnable": median_of("seconds_learnable", with_learnable),
        "files_with_learnable": len(with_learnable),
        "not_fresh": sum(f["seconds"] is None for f in per_file),
        "wait_seconds": wait,
    }


def _learned_log(client: Client) -> str | None:
    """The summary a learn on open logs when it ends (``window/logMessage``)."""
    return next((m for _, m in client.logs if m.startswith("jaxlsp: learned the inputs")), None)


def own_pytest(root: Path, budget: float) -> dict[str, Any]:
    """The repository's own ``python -m pytest`` over the test files a folder learn runs
    (``find_examples``, scripts left out: pytest does not run them), in the interpreter the learn
    uses, one run, on the CPU as the learn's workers are (``JAX_PLATFORMS=cpu``)."""
    from jaxlsp.capture.environment.interpreters import select_interpreter
    from jaxlsp.capture.inputs.learning import find_examples

    python = select_interpreter(workspace_root=root).python
    examples = find_examples([root], root)
    tests = [os.path.relpath(str(e["path"]), root) for e in examples if e["kind"] == "test"]
    out: dict[str, Any] = {"files": len(tests), "scripts_not_run": len(examples) - len(tests)}
    if not tests:
        return out
    started = time.monotonic()
    try:
        proc = subprocess.run(
            # a file that fails to import (a package not installed) must not end pytest before
            # the others run, as it does not end the learn's (runners.py passes the same flag)
            [python, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=budget,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
        )
        out.update({"exit": proc.returncode, "last_line": _last_line(proc.stdout)})
    except subprocess.TimeoutExpired:
        out["stopped"] = f"after {budget:.0f} s"
    out["wall_seconds"] = round(time.monotonic() - started, 1)
    return out


def target_key(target: dict[str, Any]) -> str:
    return f"{target['path']}::{target['name']}"


def state_of(states: dict[tuple[str, str], dict[str, Any]], target: dict[str, Any]) -> dict[str, Any]:
    return states.get((Path(target["path"]).as_uri(), target["name"]), {"state": "unlisted"})


def figures(
    targets: list[dict[str, Any]],
    states: dict[tuple[str, str], dict[str, Any]],
    lines: dict[tuple[str, int], bool],
    owners: dict[tuple[str, int], set[str]],
    called: set[str],
) -> dict[str, Any]:
    """Fresh targets and lines with a shape: of all targets, and of those the repository calls."""
    fresh = {target_key(t) for t in targets if state_of(states, t)["state"] == "fresh"}
    called_lines = [k for k, o in owners.items() if o & called and k in lines]
    return {
        "states": dict(Counter(state_of(states, t)["state"] for t in targets)),
        "fresh": len(fresh),
        "called_fresh": len(fresh & called),
        "body_lines": len(lines),
        "lines_with_shape": sum(lines.values()),
        "called_body_lines": len(called_lines),
        "called_lines_with_shape": sum(lines[k] for k in called_lines),
    }


def _wanted(targets: list[dict[str, Any]], called: set[str]) -> dict[str, set[str]]:
    """The names of the called targets, by file."""
    wanted: dict[str, set[str]] = {}
    for target in targets:
        if target_key(target) in called:
            wanted.setdefault(target["path"], set()).add(str(target["name"]))
    return wanted


def measure_open(
    root: Path, previous: Path, calls_cache: Path, open_wait: float, open_files: int | None
) -> dict[str, Any]:
    """Learn on open alone (``--open-only PREVIOUS``): which targets the repository calls from the
    calls cache, and which of them a folder learn makes fresh from a whole run's figures
    (``PREVIOUS``, its ``dark_called``); no measured server, no folder learn. The calls audit
    runs when the cache has no answer for the repository yet."""
    root = root.resolve()
    targets = [t for t in discover(root) if t["path"].endswith(".py")]
    cached = calls_cache / f"{root.name}.json"
    if not cached.exists():  # the audit, once (minutes)
        reached = calls(root, targets, 900.0)
        cached.parent.mkdir(parents=True, exist_ok=True)
        relative = sorted(os.path.relpath(k, root) for k in reached["called"])
        cached.write_text(json.dumps({**reached, "called": relative}))
    kept = json.loads(cached.read_text())
    called = {str(root / k) if not os.path.isabs(k) else k for k in kept["called"]}
    called -= {target_key(t) for t in targets if _is_test(t)}
    before = json.loads(previous.read_text())
    before = before[0] if isinstance(before, list) else before
    dark = {str(d["target"]) for d in before.get("dark_called") or []}
    wanted = _wanted(targets, called)
    learnable: dict[str, set[str]] = {}
    for target in targets:
        if target_key(target) in called and f"{os.path.relpath(target['path'], root)}::{target['name']}" not in dark:
            learnable.setdefault(target["path"], set()).add(str(target["name"]))
    opening = open_learn(root, sorted(wanted)[:open_files], wanted, open_wait, learnable)
    return {"repo": root.name, "called": len(called), "open_learn": opening, "dark_from": str(previous)}


def measure(
    root: Path,
    settle: float,
    learn: bool = True,
    budget: float = 900.0,
    calls_cache: Path | None = None,
    open_wait: float = 360.0,
    open_files: int | None = None,
    own_tests: bool = True,
) -> dict[str, Any]:
    root = root.resolve()
    started = time.monotonic()
    targets = [t for t in discover(root) if t["path"].endswith(".py")]
    files = sorted({t["path"] for t in targets})
    reached = None
    if learn:
        # The audit runs every test file under a trace function (minutes): --calls-cache keeps its
        # answer, which depends on the repository alone, for the next run.
        kept = calls_cache / f"{root.name}.json" if calls_cache is not None else None
        # Kept relative to the root: the same repository checked out elsewhere reads it too.
        if kept is not None and kept.exists():
            reached = json.loads(kept.read_text())
            reached["called"] = {str(root / k) if not os.path.isabs(k) else k for k in reached["called"]}
        else:
            reached = calls(root, targets, budget)
            if kept is not None:
                kept.parent.mkdir(parents=True, exist_ok=True)
                relative = sorted(os.path.relpath(k, root) for k in reached["called"])
                kept.write_text(json.dumps({**reached, "called": relative}))
    tests = {target_key(t) for t in targets if _is_test(t)}  # pytest's entry points: not counted
    called = reached["called"] - tests if reached is not None else set()
    texts = {file: Path(file).read_text(encoding="utf-8", errors="replace").splitlines() for file in files}
    bodies = {file: code_lines("\n".join(text)) for file, text in texts.items()}
    learned: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    pytest_run: dict[str, Any] | None = None
    with (
        tempfile.TemporaryDirectory(prefix="jaxlsp-live-repos-") as cwd,
        tempfile.TemporaryDirectory(prefix="jaxlsp-live-repos-cache-") as cache,
    ):
        client = start(root, Path(cache), Path(cwd))
        try:
            for file in files:
                client.open(file)
            settle_s = wait_settled(client, root, settle, "open")
            before_snap = snapshot(client, targets, texts, bodies)
            before_states, before_lines, owners, _ = before_snap
            hovered_s = time.monotonic() - started
            before = figures(targets, before_states, before_lines, owners, called)
            before["operations"] = operation_figures(client, root, targets, before_snap)
            final_states, final_lines = before_states, before_lines
            if learn:
                # One jaxlsp.learnShapes on the folder, then every file closed and opened again.
                # The repository's own pytest over the same test files, just before the learn, so
                # that both run on the same machine under the same load.
                pytest_run = own_pytest(root, budget) if own_tests else None
                t0 = time.monotonic()
                result = client.request(
                    "workspace/executeCommand",
                    # the run's budget, not the command's default (900 s): a --budget below it
                    # left the request unanswered at budget + 120 s (lineax, interpax)
                    {"command": "jaxlsp.learnShapes", "arguments": [{"uri": root.as_uri(), "budget": budget}]},
                    timeout=budget + 120.0,
                )
                learn_s = time.monotonic() - t0
                learned = {
                    "wall_seconds": round(learn_s, 1),
                    "learned": result.get("learned"),
                    "examples": len(result.get("examples", [])),
                    "outcomes": dict(Counter(e["outcome"] for e in result.get("examples", []))),
                    "failures": result.get("failures", [])[:40],
                    **({"stopped": result["stopped"]} if result.get("stopped") else {}),
                }
                print(f"{root.name} learned in {learn_s:.0f} s: {learned['outcomes']}", file=sys.stderr, flush=True)
                for file in files:
                    client.notify("textDocument/didClose", {"textDocument": {"uri": Path(file).as_uri()}})
                for file in files:
                    client.open(file, version=2)
                wait_settled(client, root, settle, "after learn")
                final_snap = snapshot(client, targets, texts, bodies)
                final_states, final_lines, owners, _ = final_snap
                after = figures(targets, final_states, final_lines, owners, called)
                after["operations"] = operation_figures(client, root, targets, final_snap)
            client.pump(1.0)
            contracts = [
                {"path": _relative(uri, root), "line": d["range"]["start"]["line"] + 1, "message": d["message"]}
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
    opening: dict[str, Any] | None = None
    if learn and open_wait > 0 and open_files != 0:
        # A user opens one file and waits for its shapes: each file that defines a target the
        # repository calls, opened alone in a fresh server with learn on open.
        wanted = _wanted(targets, called)
        learnable: dict[str, set[str]] = {}
        for target in targets:
            if target_key(target) in called and state_of(final_states, target)["state"] == "fresh":
                learnable.setdefault(target["path"], set()).add(str(target["name"]))
        opening = open_learn(root, sorted(wanted)[:open_files], wanted, open_wait, learnable)
    final = list(final_states.values())
    owned_fresh = {target_key(t) for t in targets if state_of(final_states, t)["state"] == "fresh"}
    fresh_lines = [k for k, o in owners.items() if o & owned_fresh and k in final_lines]
    reasons = Counter((t["state"], _short(t.get("reason", ""))) for t in final if t["state"] in ("failed", "notLive"))
    out: dict[str, Any] = {
        "repo": root.name,
        "files_opened": len(files),
        "targets": len(targets),
        "settle_seconds": round(settle_s, 1),
        "hover_seconds": round(hovered_s - settle_s, 1),
        "before": before,
    }
    if reached is not None:
        dark = [
            {
                "target": f"{os.path.relpath(t['path'], root)}::{t['name']}",
                "state": state_of(final_states, t)["state"],
                "reason": state_of(final_states, t).get("reason", "")[:300],
            }
            for t in targets
            if target_key(t) in called and state_of(final_states, t)["state"] != "fresh"
        ]
        out.update(
            {
                "called": len(called),
                "test_functions": len(tests),
                "calls_seconds": reached["seconds"],
                "calls_failures": reached["failures"],
                "learn": learned,
                "own_pytest": pytest_run,
                "open_learn": opening,
                "learn_over_pytest": (
                    round(learned["wall_seconds"] / pytest_run["wall_seconds"], 2)
                    if learned is not None and pytest_run is not None and pytest_run.get("wall_seconds")
                    else None
                ),
                "after": after,
                "called_fresh_share": round((after or before)["called_fresh"] / len(called), 3) if called else None,
                "dark_called": dark,
            }
        )
    out.update(
        {
            "fresh_misses": [
                f"{os.path.relpath(path, root)}:{line + 1}: {texts[path][line].strip()[:100]}"
                for path, line in sorted(fresh_lines)
                if not final_lines[(path, line)]
            ][:80],
            "reasons": [{"state": s, "reason": r, "count": n} for (s, r), n in reasons.most_common()],
            "failed": [
                {"name": t["name"], "path": _relative(t["uri"], root), "reason": t.get("reason", "")}
                for t in final
                if t["state"] == "failed"
            ],
            "shape_contracts": contracts,
            "other_diagnostics": dict(other),
            "wall_seconds": round(time.monotonic() - started, 1),
            "slowest": _slowest(client.timeline, root),
        }
    )
    return out


# The driver of one example in the calls audit: run as ``python -c DRIVER OUT ROOT SPEC`` in the
# repository's interpreter. A trace function (no line events: it returns None) notes the code of
# every workspace function that starts, and for each ``__call__`` the class of its ``self`` (an
# inherited ``__call__`` calls the subclass), each once, to OUT as it happens (a killed run keeps
# what it saw).
DRIVER = r"""
import json, os, runpy, sys, threading
out, root, spec = sys.argv[1], os.path.realpath(sys.argv[2]), json.loads(sys.argv[3])
skip = (os.sep + ".venv" + os.sep, os.sep + "site-packages" + os.sep)
sink = open(out, "a")
memo = {}
seen = set()
def note(*key):
    if key not in seen:
        seen.add(key)
        sink.write(json.dumps(key) + "\n")
        sink.flush()
def mine(code):
    found = memo.get(code)
    if found is None:
        name = code.co_filename
        real = "" if name.startswith("<") else os.path.realpath(name)
        found = memo[code] = real if real.startswith(root + os.sep) and not any(s in real for s in skip) else ""
    return found
def tracer(frame, event, arg):
    code = frame.f_code
    path = mine(code)
    if path:
        note("code", path, code.co_firstlineno)
        if code.co_name == "__call__" and code.co_argcount:
            this = frame.f_locals.get(code.co_varnames[0])
            cls = type(this)
            module = sys.modules.get(cls.__module__)
            file = getattr(module, "__file__", None)
            if file:
                note("class", os.path.realpath(file), cls.__qualname__)
    return None
os.chdir(root)
src = [root + "/src"] if os.path.isdir(root + "/src") else []
sys.path[:] = [p for p in sys.path if p not in ("", root)] + [root] + src  # as an editable install
threading.settrace(tracer)
sys.settrace(tracer)
status = 0
try:
    if spec["kind"] == "test":
        import pytest
        status = int(pytest.main([spec["path"], "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]))
    else:
        sys.argv = [spec["path"], *spec.get("argv", [])]
        runpy.run_path(spec["path"], run_name="__main__")
finally:
    sys.settrace(None)
    sink.close()
sys.exit(status)
"""


def calls(root: Path, targets: list[dict[str, Any]], budget: float, timeout: float = 300.0) -> dict[str, Any]:
    """Which targets the repository itself calls: each example ``jaxlsp learn`` would run (its test
    files and the scripts its docs run, ``capture/learning.find_examples``), run once more in the
    repository's interpreter outside jaxlsp, with a trace function that notes every workspace
    function and ``__call__`` that starts. A target is called when its function ran, or when a
    ``__call__`` ran on an instance of its class; test functions themselves (pytest calls them,
    with its fixtures) are not. This is independent of the signature hooks, so a target they fail
    to record still counts (and shows as dark after learning)."""
    from jaxlsp.capture.environment.interpreters import select_interpreter
    from jaxlsp.capture.inputs.learning import find_examples

    python = select_interpreter(workspace_root=root).python
    examples = find_examples([root], root)
    started = time.monotonic()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="jaxlsp-live-repos-calls-") as scratch:
        out = Path(scratch) / "reached.jsonl"
        out.touch()
        for example in examples:
            left = budget - (time.monotonic() - started)
            if left <= 1.0:
                failures.append(f"{example['text']}: not run (out of time)")
                continue
            try:
                proc = subprocess.run(
                    [python, "-c", DRIVER, str(out), str(root), json.dumps(dict(example))],
                    cwd=root,
                    capture_output=True,
                    text=True,
                    timeout=min(timeout, left),
                    env={**os.environ, "JAX_PLATFORMS": "cpu"},
                )
                if proc.returncode not in (0, 1, 5):  # pytest: passed, some failed, none collected
                    failures.append(
                        f"{example['text']}: exit {proc.returncode}: {_last_line(proc.stdout + proc.stderr)}"
                    )
            except subprocess.TimeoutExpired:
                failures.append(f"{example['text']}: stopped after {min(timeout, left):.0f} s")
        reached = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    codes = {(path, line) for kind, path, line in reached if kind == "code"}
    classes = {(path, name) for kind, path, name in reached if kind == "class"}
    called: set[str] = set()
    for target in targets:
        path = os.path.realpath(target["path"])
        if _is_test(target):
            continue  # a test function: pytest calls it, with its fixtures; not the repository's call
        if target["kind"] == "function":
            first = _first_lines(path).get(int(target["line"]))
            if first is not None and (path, first) in codes:
                called.add(target_key(target))
        elif (path, target["name"]) in classes:
            called.add(target_key(target))
    return {"called": called, "seconds": round(time.monotonic() - started, 1), "failures": failures}


def _is_test(target: dict[str, Any]) -> bool:
    """A test function pytest collects (``test*`` in a test file)."""
    name = os.path.basename(target["path"])
    in_test_file = name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    return in_test_file and target["kind"] == "function" and str(target["name"]).startswith("test")


def _first_lines(path: str) -> dict[int, int]:
    """Per ``def`` (by its keyword line, and by its first decorator's line): the code's first line
    (``co_firstlineno``, the first decorator's when decorated)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return {}
    found: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found[node.lineno] = found[first] = first
    return found


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _slowest(timeline: dict[str, list[tuple[float, str]]], root: Path, count: int = 10) -> list[dict[str, Any]]:
    """The targets that spent longest tracing (a not-live verdict counts: finding out takes time too)."""
    spans: list[dict[str, Any]] = []
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


DEFAULT_REPOS = Path(__file__).resolve().parent.parent / "build" / "live-repos"
BAR = 0.8  # issue 46: the share of the targets a repository calls that are fresh after one learn
OPEN_BAR = 60.0  # issue 56: median seconds from opening a file (learn on open) to its called targets fresh
PYTEST_BAR = 1.2  # issue 56: a folder learn's wall time over the repository's own pytest's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "repos", nargs="*", type=Path, help=f"repository checkouts (default: every folder in {DEFAULT_REPOS})"
    )
    parser.add_argument("--settle", type=float, default=1200.0, help="seconds to wait for live traces to settle")
    parser.add_argument("--no-learn", action="store_true", help="only open the files (no calls audit, no learn)")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for the learn run (and the audit)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--calls-cache", type=Path, help="keep (and reuse) which targets each repository calls here")
    parser.add_argument(
        "--open-wait",
        type=float,
        default=360.0,
        help="seconds each file opened with learn on open may take to turn its called targets fresh (0: skip)",
    )
    parser.add_argument("--open-files", type=int, help="open at most this many files with learn on open (default all)")
    parser.add_argument(
        "--no-pytest", action="store_true", help="do not run the repository's own pytest beside the learn"
    )
    parser.add_argument(
        "--open-only",
        type=Path,
        metavar="PREVIOUS_JSON",
        help="only the learn-on-open figures, with --calls-cache and a whole run's figures saying what a folder"
        " learn makes fresh",
    )
    args = parser.parse_args()
    if args.open_only is not None:
        if args.calls_cache is None:
            parser.error("--open-only needs --calls-cache (which targets the repository calls)")
        found = [
            measure_open(repo, args.open_only, args.calls_cache, args.open_wait, args.open_files) for repo in args.repos
        ]
        print(json.dumps(found, indent=1), flush=True)
        if args.json:
            args.json.write_text(json.dumps(found, indent=1))
        return
    repos = args.repos or (sorted(p for p in DEFAULT_REPOS.iterdir() if p.is_dir()) if DEFAULT_REPOS.is_dir() else [])
    if not repos:
        print(f"live_repos: skipped (no repository given and none in {DEFAULT_REPOS})")
        return
    results = []
    for repo in repos:
        result = measure(
            repo,
            args.settle,
            learn=not args.no_learn,
            budget=args.budget,
            calls_cache=args.calls_cache,
            open_wait=args.open_wait,
            open_files=args.open_files,
            own_tests=not args.no_pytest,
        )
        results.append(result)
        print(json.dumps(result, indent=1), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    missed = False
    for r in results:
        b, a = r["before"], r.get("after")
        line = (
            f"{r['repo']}: {r['targets']} targets, fresh {b['fresh']}"
            f", lines with a shape {b['lines_with_shape']}/{b['body_lines']}"
        )
        if a is None:
            ops = b["operations"]
            line += (
                f", lines holding a JAX operation with a shape {ops['fresh_op_lines_with_shape']}"
                f"/{ops['fresh_op_lines']}, symbolic dimensions {ops['symbolic_dims']}"
            )
        if a is not None and r.get("learn") is not None:
            share = r["called_fresh_share"] or 0.0
            missed = missed or share < BAR
            line += (
                f"; the repository calls {r['called']}: fresh {b['called_fresh']} -> {a['called_fresh']}"
                f" ({100 * share:.0f} %, bar {100 * BAR:.0f} %), lines with a shape {b['lines_with_shape']} ->"
                f" {a['lines_with_shape']} of {a['body_lines']} (of the called targets' {a['called_body_lines']}:"
                f" {b['called_lines_with_shape']} -> {a['called_lines_with_shape']})"
                f", learn {r['learn']['wall_seconds']} s"
            )
            ops = a["operations"]
            line += (
                f"; lines holding a JAX operation with a shape {ops['fresh_op_lines_with_shape']}"
                f"/{ops['fresh_op_lines']}, symbolic dimensions {ops['symbolic_dims']}"
                f" (hover lines {ops['symbolic_hover_lines']})"
            )
            ratio = r.get("learn_over_pytest")
            if ratio is not None:
                missed = missed or ratio > PYTEST_BAR
                line += f"; own pytest {r['own_pytest']['wall_seconds']} s, learn/pytest {ratio} (bar {PYTEST_BAR})"
            opening = r.get("open_learn")
            if opening is not None and opening["files"]:
                median = opening["median_seconds"]
                missed = missed or median is None or median > OPEN_BAR
                shown = "never" if median is None else f"{median} s"
                learnable = opening.get("median_seconds_learnable")
                line += (
                    f"; learn on open: called targets fresh in {shown} (median of {len(opening['files'])} files,"
                    f" {opening['not_fresh']} not fresh; bar {OPEN_BAR:.0f} s), those a folder learn makes fresh"
                    f" in {'never' if learnable is None else f'{learnable} s'}"
                    f" (median of {opening.get('files_with_learnable', 0)} files)"
                )
        print(line, flush=True)
    if missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
