"""Learning call signatures from one of the workspace's own examples (``jaxlsp learn``).

The example (a test file run as ``python -m pytest`` would, a script, a module) runs with the
signature hooks in every workspace file (:mod:`.signatures`) and nothing else watched: no target
is traced, no graph made. A script, module or notebook is stopped as soon as it has nothing new to
teach: once it recorded something, a stretch of ``idle`` seconds without a new signature ends it (a
training script does not train). A test file runs its tests to their end (a test's model is built
and compiled between two tests' calls, for longer than any idle stretch on a busy machine, and tests
end by themselves); both stop at their share of the deadline, a little before the client's own, so that what
it learned still comes back. What comes back is the records, how the run ended, and the calls no
recipe could spell (``learn.unspelled``: each target's first, with the pytest test that made it),
which the client keeps as the example to replay up to that call.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import types

from jaxlsp.worker.core.failures import CaptureError, Workspace, first_paragraph
from jaxlsp.worker.core.phases import announce, send_learned
from jaxlsp.worker.examples import signatures
from jaxlsp.worker.examples.runners import Rewrite, run_example
from jaxlsp.worker.protocol import WorkerRequest

DEFAULT_IDLE = 20.0  # seconds without a new signature after which an example has taught what it will
STREAM_EVERY = 0.5  # seconds between two sends of new records while the example runs
MARGIN = 0.15  # the share of the deadline kept for writing the result before the client's kill


class Unwatched:
    """What the runners need of a hook when no target is watched: the first-call finder of an
    empty path matches no module."""

    path = ""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.fired = False

    def compile(self, source: bytes, path: str, rewrite: Rewrite | None = None) -> types.CodeType:
        return compile(source, path, "exec", dont_inherit=True)


def learn(request: WorkerRequest, workspace: Workspace, timings: dict[str, float], extra: dict[str, object]) -> None:
    """Run the request's example with the recorder of the capture in progress; ``extra["learn"]``
    says how it ended. A worker process is ended from here once the example is idle."""
    recorder = signatures.CURRENT
    if recorder is None:
        raise CaptureError("internal", "a learning run needs the signature hooks (signatures: true)")
    example = request["profile"]["example"].copy()
    if not os.path.exists(str(example.get("path", ""))):
        raise CaptureError("example", f"running {example.get('text')}: no such file: {example.get('path')}")
    learn_options = dict(request.get("learn") or {})
    # tests end by themselves: only their deadline stops them (a model compiled between two tests
    # was taken for an idle run, and the next test's targets were never reached)
    idle = float("inf") if example.get("kind") == "test" else float(learn_options.get("idle", DEFAULT_IDLE))
    deadline = learn_options.get("deadline")
    root = workspace.root or os.getcwd()
    os.chdir(root)
    # examples run side by side with the user's own work (and live traces): they wait their turn
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)
    announce(request, "run")
    started = time.monotonic()
    fd = request.get("resultFd")
    stream = _Stream(fd if isinstance(fd, int) else -1)
    if stream.fd >= 0:
        stop_at = started + float(deadline) * (1 - MARGIN) if deadline else None
        watch = threading.Thread(
            target=_watch,
            args=(request, recorder, timings, idle, stop_at, started, stream),
            name="jaxlsp-learn",
            daemon=True,
        )
        watch.start()
    argv = sys.argv[:]
    try:
        how, exc, detail = run_example(example, Unwatched(workspace), root, first_cases_first=True)
    finally:
        sys.argv[:] = argv
        stream.close()  # the result comes next on the same pipe, whole: nothing may cut into it
    timings["run"] = time.monotonic() - started
    cause = f": {first_paragraph(exc)}" if exc is not None else ""
    extra["learn"] = {
        "outcome": how,
        "message": f"{example.get('text')} {how}{detail}{cause}",
        "unspelled": list(recorder.unspelled),
    }


class _Stream:
    """The records sent so far on the result pipe while the example runs; closed before the result
    is written there, by whichever thread writes it (one lock: a line never cuts into the result)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.sent = 0
        self.lock = threading.Lock()
        self.closed = fd < 0

    def send(self, records: list[dict[str, object]]) -> None:
        with self.lock:
            fresh = records[self.sent :]
            if self.closed or not fresh:
                return
            try:
                send_learned(self.fd, fresh)
            except (OSError, TypeError, ValueError):
                self.closed = True  # the client is gone, or a record JSON cannot take: the result still has them
                return
            self.sent += len(fresh)

    def close(self) -> None:
        with self.lock:
            self.closed = True


def _watch(
    request: WorkerRequest,
    recorder: signatures.Recorder,
    timings: dict[str, float],
    idle: float,
    stop_at: float | None,
    started: float,
    stream: _Stream,
) -> None:
    """Send new records as they come; deliver what was learned and end the process, once the run is
    idle or out of time."""
    sent_at = 0.0
    while True:
        time.sleep(0.1)
        now = time.monotonic()
        quiet = recorder.records and now - max(recorder.last_new, started) >= idle
        late = stop_at is not None and now >= stop_at
        if quiet or late:
            break
        if now - sent_at >= STREAM_EVERY and len(recorder.records) > stream.sent:
            stream.send(recorder.records)  # it sends what is past its count: no copy
            sent_at = now
    stream.close()
    timings["run"] = now - started
    why = f"stopped: nothing new for {idle:.0f} s" if quiet else "stopped at its deadline"  # idle: a script
    result = {
        "ok": True,
        "timings": timings,
        "signatures": list(recorder.records),
        "learn": {
            "outcome": "stopped",
            "message": f"{request['profile']['example'].get('text')} {why}",
            "unspelled": list(recorder.unspelled),
        },
    }
    data = json.dumps(result, allow_nan=False, separators=(",", ":")).encode("utf-8")
    fd = int(request["resultFd"])
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.close(fd)
    finally:
        for output in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                output.flush()
        os._exit(0)
