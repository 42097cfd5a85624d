"""The capture worker's entry points: ``main()`` (a fresh process) and ``capture()`` (in-process).

``main()`` reads one WorkerRequest as JSON from stdin and writes one WorkerResult as JSON to the
private pipe ``request["resultFd"]``. The user's prints go to stdout / stderr untouched.
``capture(request)`` does the work and returns the result; the warm spare forks and calls it
with ``jax_ready=True`` (jax already imported, no backend initialised). The fork server takes
``warm``, ``prime`` and ``exiting`` from this module too.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from typing import cast

from jaxlsp.worker.core import offline
from jaxlsp.worker.core.failures import CaptureError, Workspace, format_tb, from_exception
from jaxlsp.worker.core.phases import announce, write_all
from jaxlsp.worker.examples import signatures
from jaxlsp.worker.process.trace import SnapshotOnly, build_graph, trace_target
from jaxlsp.worker.process.warm import prime, warm, warm_capture
from jaxlsp.worker.protocol import ErrorInfo, ErrorKind, WorkerRequest, WorkerResult
from jaxlsp.worker.reuse import initsnap, priming
from jaxlsp.worker.tracing import limits
from jaxlsp.worker.tracing.assemble import graph_json
from jaxlsp.worker.tracing.devices import configure_jax

__all__ = ["capture", "exiting", "main", "prime", "warm", "warm_capture"]


# The objects of this process's capture, held until it exits (see :func:`exiting`); None while
# captures run in a process that goes on (tests, tools), which frees them as usual.
_HELD: list[object] | None = None


def exiting() -> None:
    """Say that this process exits once its capture's result is written (a cold worker, a
    warm spare's forked child). Its jaxpr and graph are then held to the end rather than freed,
    and the collector stays off after the graph's JSON is made rather than walking them: at
    50,000 equations that pass and the frees took 0.2 s of the worker's time, in a process whose
    exit (``os._exit``) drops everything at once."""
    global _HELD
    if _HELD is None:
        _HELD = []


def _hold(*objects: object) -> None:
    if _HELD is not None:
        from jaxlsp.graph import collector

        _HELD.extend(objects)
        collector.off_until_exit()


def main(early: float | None = None) -> None:
    """Read a request on stdin, capture, write the result to ``resultFd`` and close it.

    ``early``: the seconds the bootstrap spent importing jax (and frameworks) before the request
    came (an early worker, capture/launch/early.py); such a worker also does :func:`warm_capture` before
    it reads the request, and reports both as the ``early`` timing."""
    sys.dont_write_bytecode = True
    if early is not None:  # while the CLI still prepares the request: what every capture needs
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):  # jax missing, say: the capture itself says so, clearly
            warm_capture()
        early += time.perf_counter() - t0
    fd: int | None = None
    exiting()
    try:
        raw = sys.stdin.buffer.read()
        # The one place the request is read: the client wrote a WorkerRequest (capture/launch).
        request: WorkerRequest = json.loads(raw)
        fd = int(request["resultFd"])
        result = capture(request)
        if early is not None:
            result["timings"] = {"early": early, **(result.get("timings") or {})}
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result = {
            "ok": False,
            "error": {"kind": ErrorKind.INTERNAL, "message": f"bad worker request: {exc}", "traceback": format_tb(exc)},
        }
    data = _dumps(result)
    if fd is not None:
        data = limits.check_bytes(data, request.get("limits"))
    if fd is None:
        sys.stderr.write(data.decode("utf-8", errors="replace"))
        sys.exit(2)
    write_all(fd, data)
    os.close(fd)
    # The result is out: skip interpreter teardown (0.2 s of module and XLA finalisers), but only
    # after the user's buffered output has reached its pipes.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def _dumps(result: WorkerResult) -> bytes:
    try:
        return json.dumps(result, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:
        error = {"kind": "internal", "message": f"the result could not be written as JSON: {exc}"}
        return json.dumps({"ok": False, "error": error}).encode("utf-8")


@contextlib.contextmanager
def _scratch_dir(env: dict[str, str]) -> Iterator[str]:
    """The capture's working directory, with ``TMPDIR`` inside it, and the profile's ``env`` set;
    everything is undone and removed afterwards (what user code leaves in tempfile's folder too)."""
    previous = os.getcwd() if os.path.isdir(os.curdir) else None
    # Named by process group, so the supervisor can remove it when the worker dies.
    scratch = tempfile.mkdtemp(prefix=f"jaxlsp-capture-{os.getpgrp()}-")
    tmp = os.path.join(scratch, "tmp")
    os.mkdir(tmp)
    names = {**env, "TMPDIR": tmp, "TEMP": tmp, "TMP": tmp}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    tempfile.tempdir = None  # tempfile caches its folder: look again
    os.chdir(scratch)
    try:
        yield scratch
    finally:
        with contextlib.suppress(OSError):
            if previous is not None:
                os.chdir(previous)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir = None
        shutil.rmtree(scratch, ignore_errors=True)


def capture(request: WorkerRequest, *, jax_ready: bool = False) -> WorkerResult:
    """Capture the request's target into a graph; errors come back structured, never raised.
    An ``offline`` request (a live trace) reaches no other machine (worker/core/offline.py): when it
    failed after wanting the network, the failure is a refusal that says so."""
    if not request.get("offline"):
        return _capture_reporting(request, jax_ready)
    with offline.offline():
        result = _capture_reporting(request, jax_ready)
    error = result.get("error")
    if error is not None and offline.attempts() and error["kind"] not in ("timeout", "crash", "memory"):
        error["kind"] = ErrorKind.REFUSED
        error["message"] = offline.refusal(error["message"])
    return result


def _capture_reporting(request: WorkerRequest, jax_ready: bool) -> WorkerResult:
    sys.dont_write_bytecode = True
    timings: dict[str, float] = {}
    extra: dict[str, object] = {"started": time.monotonic()}
    workspace = Workspace(str(request.get("workspaceRoot", "")))
    initsnap.CAPTURE_STARTED = time.time()
    if request.get("snapshotOnly") and jax_ready:
        initsnap.start()  # before the import: what a module runs or reads there makes the model too
    # A capture forked from the warm spare notes the calls of JAX's functions that missed JAX's
    # caches, for the spare to make before its next fork (worker/reuse/priming.py); not under a
    # profile's env or x64, which the spare does not run with.
    profile = request.get("profile") or {}
    recorder = priming.Recorder() if jax_ready and not request.get("env") and not profile.get("x64") else None
    # Call signatures of the workspace's targets that run (worker/examples/signatures.py): not
    # for the init snapshot's own request, which traces nothing.
    signing = None
    if request.get("signatures") and not request.get("snapshotOnly"):
        target = request.get("target") or {}
        own = (os.path.realpath(str(target.get("path", ""))), str(target.get("name", "")))
        signing = signatures.Recorder(workspace, exclude=own)
    try:
        with (
            _scratch_dir(dict(request.get("env") or {})),
            _gc_relaxed(),
            recorder.installed() if recorder is not None else contextlib.nullcontext(),
            initsnap.stopped(),  # the snapshot's recording, at the latest (ended when one is made)
            signing.installed() if signing is not None else contextlib.nullcontext(),
        ):
            graph = _capture(request.copy(), workspace, timings, jax_ready, extra)
        result: WorkerResult = {"ok": True, "timings": timings}
        if signing is not None and signing.records:
            result["signatures"] = signing.records
        primes = recorder.entries() if recorder is not None else []
        if primes:
            result["primes"] = primes
        if graph is not None:
            result["graph"] = graph
        # What the stages left in ``extra`` under the result's own names (each stage writes its
        # key as WorkerResult spells it); a values run's payloads come back even when empty.
        named = ("structure", "hint", "roots", "callsite", "learned", "replayed", "initialisers", "snapshotWanted")
        passed = {key: extra[key] for key in (*named, "learn") if extra.get(key) is not None}
        passed.update({key: extra[key] for key in ("arrays", "saved") if key in extra})
        result.update(cast(WorkerResult, passed))
        return result
    except CaptureError as exc:
        return {"ok": False, "error": exc.info(), "timings": timings}
    except MemoryError as exc:
        failure = from_exception("memory", exc, workspace, "the capture ran out of memory (the worker's memory cap)")
        return {"ok": False, "error": failure.info(), "timings": timings}
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        error: ErrorInfo = {
            "kind": ErrorKind.INTERNAL,
            "message": f"the capture worker failed: {type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-20000:],
        }
        return {"ok": False, "error": error, "timings": timings}


def _capture(
    request: WorkerRequest, workspace: Workspace, timings: dict[str, float], jax_ready: bool, extra: dict[str, object]
) -> dict[str, object] | None:
    """The graph's JSON form (None: no graph, which only an example run that never reached the
    target can leave; it raises first)."""
    profile = request["profile"]
    if sys.platform.startswith("win"):
        raise CaptureError("refused", "tracing is not supported on Windows yet")
    if request.get("learn") is not None and profile.get("example"):  # jaxlsp learn: signatures only
        from jaxlsp.worker.examples import learning

        configure_jax(str(profile.get("device", "cpu")), bool(profile.get("x64", False)), jax_ready)
        learning.learn(request, workspace, timings, extra)
        return None
    if profile.get("example"):  # learn the inputs from a run of one of the workspace's own examples
        for key, what in (("values", "a values run"), ("time", "a timed run")):
            if request.get(key) is not None:
                raise CaptureError(
                    "refused",
                    f"{what} needs its inputs written in a profile, not learned from a run of "
                    f"{profile['example'].get('text', 'an example')}: save the learned profile (--save, or "
                    f"save from the editor) and run with {key} on that profile",
                )
        from jaxlsp.worker.examples import firstcall

        devices = profile.get("devices")
        x64 = bool(profile.get("x64", False))
        device = configure_jax(str(profile.get("device", "cpu")), x64, jax_ready, int(devices) if devices else None)
        return firstcall.capture_at_first_call(request, workspace, timings, device, extra)
    try:
        found = trace_target(request, workspace, timings, jax_ready, extra)
    except SnapshotOnly as made:  # a request for the init's snapshot alone (worker/reuse/initsnap.py)
        if made.snapshot is not None:
            extra["structure"] = made.snapshot
        return None
    if not found.concrete:
        from jaxlsp.graph import collector

        # One pause from the build to the JSON: the collector back on between them (its
        # allocation count run up by the build) made a full pass over the new graph, 0.17 s at
        # 10,000 equations, in a process about to exit. A values or timed run runs the program
        # between them, with the collector on.
        with collector.paused():
            graph, _ = build_graph(request, found, workspace, timings, extra)
            data = graph_json(graph, request, timings)
            _hold(found, graph)
            return data
    graph, gb = build_graph(request, found, workspace, timings, extra)
    if found.concrete and request.get("time") is not None:
        announce(request, "time")
        t0 = time.perf_counter()
        from jaxlsp.worker.program import timing

        where = str(request["profile"].get("device") or "cpu")
        timing.measure(graph, found.closed, found.traced, dict(request["time"]), found.device, where)
        timings["time"] = time.perf_counter() - t0
    if found.concrete and request.get("values") is not None:
        announce(request, "values")
        t0 = time.perf_counter()
        from jaxlsp.worker.values import run as values_run

        values_run.run(graph, gb, found.traced, request, found.device, cast(float, extra["started"]), extra)
        timings["values"] = time.perf_counter() - t0
    data = graph_json(graph, request, timings)
    _hold(found, graph, gb)
    return data


@contextlib.contextmanager
def _gc_relaxed() -> Iterator[None]:
    """Fewer collections while importing and tracing: each full collection used to walk the whole
    jax / flax heap the worker starts with, about a fifth of a large trace's time. The inherited
    objects are frozen out of the collector's reach and gen-0 collections come 70x less often;
    cycles are still collected, so a long trace's memory stays bounded."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
