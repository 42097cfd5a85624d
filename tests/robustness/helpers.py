"""Shared pieces of the robustness suite: process checks, the figures file, a raw stdio LSP peer.

The suite measures a few figures (lens latency, burst outcomes, RSS, paging time); each test adds
its own to ``build/robustness/figures.json`` (merged, one key per figure) and prints them, and
``docs/reliability.md`` quotes what was seen.
"""

from __future__ import annotations

import contextlib
import fcntl
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]
WORKSPACES = ROOT / "tests" / "workspaces"
FIGURES = ROOT / "build" / "robustness" / "figures.json"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PIDS_ROOT = Path("/sys/fs/cgroup/pids")


def record(**figures: Any) -> None:
    """Merge ``figures`` into the figures file (under a lock: tests run in parallel) and print them."""
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    with open(FIGURES.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = json.loads(FIGURES.read_text())
        except (OSError, ValueError):
            data = {}
        data.update(figures)
        FIGURES.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(json.dumps(figures))


# -- processes ------------------------------------------------------------------------------------


def stat(pid: int) -> tuple[str, int, int, int] | None:
    """State, parent, process group and session of ``pid``; None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])


def alive(pid: int) -> bool:
    info = stat(pid)
    return info is not None and info[0] != "Z"


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def standby(pid: int) -> bool:
    """A warm spare's standby: a child forked ahead of the next capture, waiting for its request
    (jaxlsp/worker/process/forkserver.py names it so); it has run no user code."""
    from jaxlsp.worker.process.forkserver import STANDBY_NAME

    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == STANDBY_NAME
    except OSError:
        return False


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group or session is ``pgid``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := stat(int(name))) is not None and info[0] != "Z" and pgid in info[2:]:
            found.append(int(name))
    return found


def capture_cgroups(*owners: int) -> list[Path]:
    """Per-capture cgroups of these processes (``jaxlsp-OWNER-*``: a spare or, for cold captures,
    the process that ran them) that still hold a process. Other suites' captures are not ours."""
    if not PIDS_ROOT.is_dir():
        return []
    left = []
    prefixes = tuple(f"jaxlsp-{owner}-" for owner in owners)
    # os.walk, not rglob: other suites' cgroups come and go while it looks (rglob then raises)
    found = [Path(top, d) for top, dirs, _ in os.walk(PIDS_ROOT) for d in dirs if d.startswith(prefixes)]
    for path in found:
        with contextlib.suppress(OSError):
            members = [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
            if members and not (len(members) == 1 and standby(members[0])):  # the next capture's own
                left.append(path)
    return left


def cgroups_usable() -> bool:
    from jaxlsp.worker import containment

    made = containment.cgroup_create(f"probe-{os.getpid()}-{time.monotonic_ns()}")
    if made is None:
        return False
    containment.cgroup_remove(made)
    return True


# -- the loop watchdog's reports (jaxlsp/server/loopwatch.py) --------------------------------------

_STALL_LINE = re.compile(r"  \d+/\d+ samples:|    \S")  # what a report's lines after the first look like
_LOOP_CPU = re.compile(r"[:,] loop (\d+) ms")


def stalls(stderr: bytes) -> list[str]:
    """The loop watchdog's reports (``JAXLSP_LOOP_WATCH``) in a server's stderr, each with its
    stacks; a line that is not part of one (a logged traceback's ``  File ...``) ends it."""
    out: list[str] = []
    open_ = False
    for line in stderr.decode("utf-8", "replace").splitlines():
        if "loop held" in line:
            out.append(line)
            open_ = True
        elif open_ and _STALL_LINE.match(line):
            out[-1] += "\n" + line
        else:
            open_ = False
    return out


def loop_cpu(report: str) -> float:
    """The loop thread's CPU milliseconds in one watchdog report (``... loop 12 ms; ...``): what
    the loop's own work held it, which a busy machine does not inflate (a stall's wall time
    includes waiting for a CPU or for the GIL)."""
    found = _LOOP_CPU.search(report.split("\n", 1)[0])
    return float(found.group(1)) if found else 0.0


# -- a raw stdio peer -----------------------------------------------------------------------------


def server_env(**extra: str) -> dict[str, str]:
    """The server's environment: private config / cache folders (the trust store lives there)."""
    env = dict(os.environ)
    env["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="jaxlsp-robust-config-")
    env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="jaxlsp-robust-cache-")
    env.update(extra)
    return env


def _limits(address_space: int | None, open_files: int | None) -> Callable[[], None] | None:
    """The server's RLIMIT_AS (both limits) and soft RLIMIT_NOFILE (the usual 1,024), if given."""
    if address_space is None and open_files is None:
        return None

    def apply() -> None:
        import resource

        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    return apply


HOLD = object()  # an answer function's result that leaves the server's request unanswered for now


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = int(error.get("code", 0))
        self.message = str(error.get("message", ""))
        self.data = error.get("data")


class Peer:
    """``python -m jaxlsp serve`` over stdio, driven by hand: raw JSON-RPC frames, so that a test
    can send what no well-behaved client library would (wrong types, 10 MB params, requests after
    shutdown). Server-to-client requests are answered by ``answers`` (method -> result function)."""

    WAIT = 30.0  # seconds on the reference machine for an answer, scaled at each wait

    def __init__(
        self,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        address_space: int | None = None,  # bytes of RLIMIT_AS for the server
        prefix: tuple[str, ...] = (),  # a command that execs the server (setpriv: another user)
        open_files: int | None = None,  # the server's soft RLIMIT_NOFILE
    ) -> None:
        self.env = env or server_env()
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "jaxlsp", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=cwd,
            preexec_fn=_limits(address_space, open_files),
        )
        self.answers: dict[str, Callable[[Any], Any]] = {
            "window/showMessageRequest": lambda params: {"title": "Cancel"},
            "workspace/configuration": lambda params: [None for _ in params.get("items", [])],
            "window/showDocument": lambda params: {"success": True},
        }
        self.notifications: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []  # every notification and server request, in order
        self.server_requests: list[dict[str, Any]] = []
        self._responses: dict[int | str, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next = 0
        self.stderr = bytearray()
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()  # to the server's requests
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._answer, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    # -- wire ----------------------------------------------------------------------------------
    def send_raw(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode())

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self._closed()
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            if length is None:
                continue
            message = json.loads(out.read(length))
            if "method" in message and "id" in message:
                self.server_requests.append(message)
                self.seen.append(message)
                answer = self.answers.get(message["method"], lambda params: None)
                result = answer(message.get("params"))
                if result is not HOLD:  # the test answers it itself, later
                    # Never written from this thread: with the server's stdin full (a test
                    # sending a thousand requests) and its stdout full behind this reader, both
                    # sides would wait on each other for good.
                    self._answers.put({"jsonrpc": "2.0", "id": message["id"], "result": result})
            elif "method" in message:
                self.seen.append(message)
                self.notifications.put(message)
            else:
                with self._lock:
                    box = self._responses.setdefault(message.get("id"), queue.Queue())
                box.put(message)

    def _answer(self) -> None:
        while True:
            message = self._answers.get()
            try:
                self.send(message)
            except (BrokenPipeError, ValueError):  # the server is gone, or stdin closed
                return

    def _closed(self) -> None:
        with self._lock:
            boxes = list(self._responses.values())
        for box in boxes:
            box.put({"closed": True})

    def _drain_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        while chunk := err.read1(65536):
            self.stderr += chunk[-65536:]
            del self.stderr[:-262144]

    # -- requests ------------------------------------------------------------------------------
    def start(self, method: str, params: Any, *, with_params: bool = True) -> int:
        with self._lock:
            self._next += 1
            ident = self._next
            self._responses.setdefault(ident, queue.Queue())
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if with_params:
            message["params"] = params
        self.send(message)
        return ident

    def wait(self, ident: int, timeout: float | None = None) -> dict[str, Any]:
        with self._lock:
            box = self._responses.setdefault(ident, queue.Queue())
        timeout = timeout or scaled(self.WAIT)
        try:
            reply = box.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to request {ident} within {timeout:.1f} s") from None
        assert "closed" not in reply, f"the server closed its output before answering request {ident}"
        return reply

    def call(self, method: str, params: Any = None, *, timeout: float | None = None, **kwargs: Any) -> Any:
        reply = self.wait(self.start(method, params, **kwargs), timeout)
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(self, root: Path, options: dict[str, Any] | None = None, caps: dict[str, Any] | None = None) -> Any:
        capabilities = caps or {
            "window": {"workDoneProgress": True, "showDocument": {"support": True}},
            "workspace": {"codeLens": {"refreshSupport": True}, "configuration": True},
            "textDocument": {"codeLens": {}, "hover": {}, "codeAction": {}, "inlayHint": {}},
        }
        result = self.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": capabilities,
                "initializationOptions": {"jaxlsp": options or {}},
            },
        )
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str | None = None, version: int = 1) -> str:
        uri = path.as_uri()
        body = path.read_text() if text is None else text
        item = {"uri": uri, "languageId": "python", "version": version, "text": body}
        self.notify("textDocument/didOpen", {"textDocument": item})
        return uri

    def alive(self) -> bool:
        """The server is running and answers a request."""
        if self.proc.poll() is not None:
            return False
        self.call("workspace/executeCommand", {"command": "jaxlsp.listTrusted", "arguments": []})
        return True

    def close(self) -> int | None:
        """shutdown + exit (when still possible), then make sure the process is gone."""
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.call("shutdown", None, timeout=scaled(15), with_params=False)
            with contextlib.suppress(Exception):
                self.send({"jsonrpc": "2.0", "method": "exit"})
            try:
                self.proc.wait(timeout=scaled(15))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def descendants(self) -> list[int]:
        """Every live process below the server."""
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:  # gone since it was listed as a child
                continue
            for task in tasks:
                with contextlib.suppress(OSError):
                    kids = [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
                    found += [k for k in kids if alive(k)]
                    todo += kids
        return found


@pytest.fixture
def peer_factory() -> Iterator[Callable[..., Peer]]:
    """Start raw peers; every one is shut down (or killed) at the end of the test."""
    peers: list[Peer] = []

    def make(**kwargs: Any) -> Peer:
        peer = Peer(**kwargs)
        peers.append(peer)
        return peer

    yield make
    for peer in peers:
        peer.close()


def copy_workspace(name: str, dest: Path) -> Path:
    import shutil

    target = dest / name
    shutil.copytree(WORKSPACES / name, target, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    return target.resolve()


def untrusted_workspace(dest: Path) -> tuple[Path, Path]:
    """A copy of ``robust_untrusted`` with a sentinel ``.venv/bin/python``: anything that runs the
    workspace's interpreter (or its ``python3``) appends a line to the returned sentinel file.
    Made here, not committed: ``.venv`` is ignored by git, and the bit that makes it executable
    would not survive everywhere."""
    root = copy_workspace("robust_untrusted", dest)
    sentinel = dest / "SENTINEL-ran"
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\nversion = 3.11.0\n")
    script = f'#!/bin/sh\necho "$0 $*" >> {sentinel}\nexec {sys.executable} "$@"\n'
    for name in ("python", "python3"):
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    return root, sentinel


# -- answers in order ------------------------------------------------------------------------------

_order = itertools.count()


class OrderedBox(queue.Queue[dict[str, Any]]):
    """A response box that notes when, among all answers, its answer arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.rank: int | None = None

    def put(self, item: dict[str, Any], block: bool = True, timeout: float | None = None) -> None:
        if self.rank is None:
            self.rank = next(_order)
        super().put(item, block, timeout)


def send_together(peer: Peer, messages: list[tuple[int | None, str, Any]]) -> dict[int, OrderedBox]:
    """Send ``messages`` (id, method, params; a notification's id is None) in one write, so that
    the server reads them at once; the requests' boxes, by id."""
    boxes: dict[int, OrderedBox] = {}
    frames = b""
    for ident, method, params in messages:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if ident is not None:
            boxes[ident] = OrderedBox()
            message["id"] = ident
        body = json.dumps(message).encode()
        frames += b"Content-Length: %d\r\n\r\n" % len(body) + body
    with peer._lock:
        peer._responses.update(boxes)
    assert peer.proc.stdin is not None
    with peer._write_lock:
        peer.proc.stdin.write(frames)
        peer.proc.stdin.flush()
    return boxes
