"""The capture worker's entry points: ``main()`` (a fresh process) and ``capture()`` (in-process).

``main()`` reads one WorkerRequest as JSON from stdin and writes one WorkerResult as JSON to the
private pipe ``request["resultFd"]``. The user's prints go to stdout / stderr untouched.
``capture(request)`` does the work and returns the result; the warm spare forks and calls it
with ``jax_ready=True`` (jax already imported, no backend initialised).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jaxlsp.capture.worker import initsnap, limits, offline, priming
from jaxlsp.capture.worker.failures import CaptureError, Workspace, format_tb, from_exception
from jaxlsp.capture.worker.protocol import ErrorInfo, WorkerRequest, WorkerResult

# The objects of this process's capture, held until it exits (see :func:`exiting`); None while
# captures run in a process that goes on (tests, tools), which frees them as usual.
_HELD: list[Any] | None = None

#: library initialisers' outputs a capture takes from the last one and leaves for the next, at most
MAX_CARRIED = 1024


def prime(entries: Any, stop: Any = None) -> int:
    """Called by the warm spare with what its captures noted: make those calls of JAX's own
    functions on abstract values, so the next fork finds JAX's caches filled (worker/priming.py);
    ``stop()`` true ends it early."""
    return priming.prime(entries, stop)


def exiting() -> None:
    """Say that this process exits once its capture's result is written (a cold worker, a
    warm spare's forked child). Its jaxpr and graph are then held to the end rather than freed,
    and the collector stays off after the graph's JSON is made rather than walking them: at
    50,000 equations that pass and the frees took 0.2 s of the worker's time, in a process whose
    exit (``os._exit``) drops everything at once."""
    global _HELD
    if _HELD is None:
        _HELD = []


def _hold(*objects: Any) -> None:
    if _HELD is not None:
        from jaxlsp.graph import collector

        _HELD.extend(objects)
        collector.off_until_exit()


def main(early: float | None = None) -> None:
    """Read a request on stdin, capture, write the result to ``resultFd`` and close it.

    ``early``: the seconds the bootstrap spent importing jax (and frameworks) before the request
    came (an early worker, capture/early.py); such a worker also does :func:`warm_capture` before
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
        request = json.loads(raw)
        fd = int(request["resultFd"])
        result = capture(request)
        if early is not None:
            result["timings"] = {"early": early, **(result.get("timings") or {})}
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result = {
            "ok": False,
            "error": {"kind": "internal", "message": f"bad worker request: {exc}", "traceback": format_tb(exc)},
        }
    data = _dumps(result)
    if fd is not None:
        data = limits.check_bytes(data, request.get("limits"))
    if fd is None:
        sys.stderr.write(data.decode("utf-8", errors="replace"))
        sys.exit(2)
    _write_all(fd, data)
    os.close(fd)
    # The result is out: skip interpreter teardown (0.2 s of module and XLA finalisers), but only
    # after the user's buffered output has reached its pipes.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def _dumps(result: Any) -> bytes:
    try:
        return json.dumps(result, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:
        error = {"kind": "internal", "message": f"the result could not be written as JSON: {exc}"}
        return json.dumps({"ok": False, "error": error}).encode("utf-8")


def announce(request: dict[str, Any], phase: str) -> None:
    """Tell the client which phase starts: a ``#phase NAME`` line on the result pipe, ahead of the
    result (which is JSON, so never starts with ``#``). In-process captures have no pipe."""
    fd = request.get("resultFd")
    if isinstance(fd, int) and fd >= 0:
        with contextlib.suppress(OSError):
            _write_all(fd, f"#phase {phase}\n".encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


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


def capture(request: WorkerRequest | dict[str, Any], *, jax_ready: bool = False) -> WorkerResult:
    """Capture the request's target into a graph; errors come back structured, never raised.
    An ``offline`` request (a live trace) reaches no other machine (worker/offline.py): when it
    failed after wanting the network, the failure is a refusal that says so."""
    if not request.get("offline"):
        return _capture_reporting(request, jax_ready)
    with offline.offline():
        result = _capture_reporting(request, jax_ready)
    error = result.get("error")
    if error is not None and offline.attempts() and error["kind"] not in ("timeout", "crash", "memory"):
        error["kind"] = "refused"
        error["message"] = offline.refusal(error["message"])
    return result


def _capture_reporting(request: WorkerRequest | dict[str, Any], jax_ready: bool) -> WorkerResult:
    sys.dont_write_bytecode = True
    timings: dict[str, float] = {}
    extra: dict[str, Any] = {"started": time.monotonic()}
    workspace = Workspace(str(request.get("workspaceRoot", "")))
    initsnap.CAPTURE_STARTED = time.time()
    if request.get("snapshotOnly") and jax_ready:
        initsnap.start()  # before the import: what a module runs or reads there makes the model too
    # A capture forked from the warm spare notes the calls of JAX's functions that missed JAX's
    # caches, for the spare to make before its next fork (worker/priming.py); not under a
    # profile's env or x64, which the spare does not run with.
    profile = request.get("profile") or {}
    recorder = priming.Recorder() if jax_ready and not request.get("env") and not profile.get("x64") else None
    try:
        with (
            _scratch_dir(dict(request.get("env") or {})),
            _gc_relaxed(),
            recorder.installed() if recorder is not None else contextlib.nullcontext(),
            initsnap.stopped(),  # the snapshot's recording, at the latest (ended when one is made)
        ):
            graph = _capture(dict(request), workspace, timings, jax_ready, extra)
        result: WorkerResult = {"ok": True, "timings": timings}
        primes = recorder.entries() if recorder is not None else []
        if primes:
            result["primes"] = primes
        if graph is not None:
            result["graph"] = graph
        if extra.get("structure") is not None:
            result["structure"] = extra["structure"]
        if extra.get("hint") is not None:
            result["hint"] = extra["hint"]
        for key in ("roots", "callsite", "learned", "replayed", "initialisers", "snapshotWanted"):
            if extra.get(key) is not None:
                result[key] = extra[key]
        for key in ("arrays", "saved"):  # a values run's payloads
            if key in extra:
                result[key] = extra[key]  # type: ignore[literal-required,unused-ignore]  # the two keys above
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
            "kind": "internal",
            "message": f"the capture worker failed: {type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-20000:],
        }
        return {"ok": False, "error": error, "timings": timings}


def _capture(
    request: dict[str, Any], workspace: Workspace, timings: dict[str, float], jax_ready: bool, extra: dict[str, Any]
) -> dict[str, Any] | None:
    """The graph's JSON form (None: no graph, which only an example run that never reached the
    target can leave; it raises first)."""
    profile = request["profile"]
    if sys.platform.startswith("win"):
        raise CaptureError("refused", "tracing is not supported on Windows yet")
    if profile.get("example"):  # learn the inputs from a run of one of the workspace's own examples
        for key, what in (("values", "a values run"), ("time", "a timed run")):
            if request.get(key) is not None:
                raise CaptureError(
                    "refused",
                    f"{what} needs its inputs written in a profile, not learned from a run of "
                    f"{profile['example'].get('text', 'an example')}: save the learned profile (--save, or "
                    f"save from the editor) and run with {key} on that profile",
                )
        from jaxlsp.capture.worker import firstcall

        devices = profile.get("devices")
        x64 = bool(profile.get("x64", False))
        device = configure_jax(str(profile.get("device", "cpu")), x64, jax_ready, int(devices) if devices else None)
        return firstcall.capture_at_first_call(request, workspace, timings, device, extra)
    try:
        found = trace_target(request, workspace, timings, jax_ready, extra)
    except _SnapshotOnly as made:  # a request for the init's snapshot alone (worker/initsnap.py)
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
        from jaxlsp.capture.worker import timing

        where = str(request["profile"].get("device") or "cpu")
        timing.measure(graph, found.closed, found.traced, dict(request["time"]), found.device, where)
        timings["time"] = time.perf_counter() - t0
    if found.concrete and request.get("values") is not None:
        announce(request, "values")
        t0 = time.perf_counter()
        from jaxlsp.capture.worker.values import run as values_run

        values_run.run(graph, gb, found.traced, request, found.device, float(extra["started"]), extra)
        timings["values"] = time.perf_counter() - t0
    data = graph_json(graph, request, timings)
    _hold(found, graph, gb)
    return data


class _SnapshotOnly(BaseException):
    """A ``snapshotOnly`` request's init is done: its snapshot (None: none could be kept). A
    BaseException: no handler of a failed attempt may take it for one."""

    def __init__(self, snapshot: Any) -> None:
        super().__init__("snapshot made")
        self.snapshot = snapshot


@dataclass
class Traced:
    """A traced target: its jaxpr, and what made it (for the graph and a values run)."""

    path: str
    kind: str
    closed: Any
    out_shape: Any
    plan: Any
    traced: Any  # targets.Traceable: ``fn`` and its ``operands`` (concrete in a values run)
    loader: Any
    builder: Any
    device: Any  # None: the CPU
    concrete: bool


def trace_target(
    request: dict[str, Any],
    workspace: Workspace,
    timings: dict[str, float],
    jax_ready: bool = False,
    extra: dict[str, Any] | None = None,
) -> Traced:
    """Load, initialise and trace the request's target; raises CaptureError. ``extra`` gets the
    variables structure (a hint for the next capture) and whether the request's hint held."""
    from jaxlsp.capture.worker import hints, jaxcompat, loading, targets
    from jaxlsp.capture.worker import inputs as inputs_mod

    target = dict(request["target"])
    profile = dict(request["profile"])
    path = os.path.abspath(str(target["path"]))
    x64 = bool(profile.get("x64", False))
    wide = inputs_mod.wide_dtypes(profile.get("inputs"), profile.get("init"))
    if wide and not x64:
        raise CaptureError(
            "refused",
            f"the inputs use 64-bit dtypes ({', '.join(wide)}) but the profile does not set x64 = true; "
            "JAX would silently narrow them to 32 bits",
        )
    t0 = time.perf_counter()
    devices = profile.get("devices")
    device = configure_jax(str(profile.get("device", "cpu")), x64, jax_ready, int(devices) if devices else None)
    timings["jax"] = time.perf_counter() - t0

    site_folders = request.get("siteFolders")
    loading.setup_sys_path(
        path, str(request.get("workspaceRoot", "")), [str(f) for f in site_folders] if site_folders else None
    )
    cell = target.get("cell")
    loader = loading.Loader(path, workspace, str(target["name"]), cell if isinstance(cell, int) else None)
    announce(request, "import")
    t0 = time.perf_counter()
    load = profile.get("load")
    module = loader.load(load if load in ("definitions", "cells") else "module")
    timings["import"] = time.perf_counter() - t0

    import jax

    announce(request, "trace")
    t0 = time.perf_counter()
    obj, method = targets.resolve_target(module, str(target["name"]), profile.get("method"))
    kind = str(target.get("kind") or targets.infer_kind(obj))
    # A values run (values/run.py) and a timed one (timing.py) make every input for real:
    # generators, a seeded init.
    running = request.get("values") is not None or request.get("time") is not None
    concrete = running
    symbolic = list(profile.get("symbolic", []))
    if concrete and symbolic:
        raise CaptureError(
            "needs_input",
            f"a {'values' if request.get('values') is not None else 'timed'} run needs the sizes of the symbolic "
            f"dimensions {', '.join(symbolic)} (the CLI's --dim NAME=SIZE, jaxlsp/trace's dims)",
        )
    mesh = None
    if profile.get("mesh"):  # the recipe's mesh: after the import, so it wins over one the module set
        where = f"profiles.{profile['name']}.mesh" if profile.get("name") else "the profile's mesh"
        mesh = inputs_mod.make_mesh(profile["mesh"], device, where)
        jax.set_mesh(mesh)  # a capture is one process: the mesh holds for its trace and values run
    builder = inputs_mod.InputBuilder(loader, symbolic, int(profile.get("seed", 0)), concrete=concrete, mesh=mesh)
    transform = profile.get("transform")
    on_device = jax.default_device(device) if device is not None else contextlib.nullcontext()
    check = _contracts(request, workspace)
    if check is not None and extra is not None:
        extra["contracts"] = check  # the graph's contracts section (graph_from_jaxpr)
    checking = contextlib.ExitStack()  # the contract check covers construction and the trace
    try:
        checking.enter_context(jaxcompat.cheap_tracer_probes())  # NNX probes tracers on every Variable write
        if check is not None:
            checking.enter_context(check)
        with on_device if concrete else contextlib.nullcontext():
            made = targets.construction(obj, kind, profile, builder)
            if kind == "function" and made.factory and not target.get("kind"):
                kind = targets.infer_kind(made.model)  # a factory of a function target may make a module
            call_args = builder.call_args(profile.get("inputs"))
        # A jaxtyping check keeps what a trace broke: a hinted trace that is thrown away must not
        # leave its findings there, so targets with annotated functions initialise for real.
        hint = request.get("structureHint") if not concrete and (check is None or not check.checked) else None
        # A replayed call runs none of its Python, so none of its annotated functions' checks:
        # targets with a jaxtyping check trace every call (worker/replay.py).
        replay = request.get("replay") is not False and (check is None or not check.checked)
        # An NNX or Equinox model's abstract init kept for the next capture (worker/initsnap.py):
        # a capture uses the last one's snapshot; a ``snapshotOnly`` request (the server's, in the
        # background after a capture that ran the init) makes one and traces nothing. Only in the
        # warm spare's captures, never past a jaxtyping check, which must see the constructor run.
        snapshots = jax_ready and not concrete and (check is None or not check.checked)
        snapshot_only = bool(request.get("snapshotOnly")) and snapshots
        if snapshot_only:
            with contextlib.suppress(OSError, AttributeError):
                os.nice(10)  # the server's background request: the user's own captures go first

        outputs: dict[Any, Any] = {}  # the initialisers' abstract outputs, for every hinted attempt
        # library initialisers' outputs the last capture of this target met (hints.stable_key)
        carried = request.get("initialisers")
        carried = carried if isinstance(carried, dict) and len(carried) <= MAX_CARRIED else {}

        def attempt(hint: Any, t0: float, repair: bool = False) -> tuple[Any, Any, Any, Any, float]:
            with on_device if concrete else contextlib.nullcontext():
                plan = targets.make_plan(
                    kind,
                    made,
                    profile,
                    method,
                    call_args,
                    hint,
                    concrete,
                    replay=replay,
                    snapshots=("record" if snapshot_only else "use") if snapshots else None,
                )
            if snapshot_only:
                raise _SnapshotOnly(plan.structure)
            if plan.init_wanted and extra is not None:
                extra["snapshotWanted"] = True
            if plan.hint_check is not None:
                plan.hint_check.repair = repair
                plan.hint_check.outputs = outputs
                plan.hint_check.carried = carried
            traced = targets.traceable(plan, call_args[0], call_args[1], transform, frozenset(builder.keys), concrete)
            if not x64:
                _refuse_wide(traced.operands)
            timings["init"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            jaxcompat.linear_input_check()  # done once a process (the warm spare's, before it forks)
            # a gradient's transpositions of repeated layers are replayed too (jaxcompat.TransposeMemo)
            memo = jaxcompat.TransposeMemo() if replay and not concrete else None
            with (
                jax.default_device(device) if device is not None else contextlib.nullcontext(),
                memo.installed() if memo is not None else contextlib.nullcontext(),
            ):
                closed, out_shape = jax.make_jaxpr(traced.fn, return_shape=True)(*traced.operands)
            if plan.replay is not None and extra is not None:
                extra["replayed"] = plan.replay.replayed
            hinted = plan.hint_check
            if hinted is not None and not hinted.held():
                repaired = hinted.repaired_structure()
                if repaired is not None:
                    raise hints.HintRepaired(repaired, ["/".join(p) for p in hinted.repairs])
                raise hints.HintStale("the call read other variables than the hint's")
            return plan, traced, closed, out_shape, t1

        if hint is None:
            plan, traced, closed, out_shape, t0 = attempt(None, t0)
        else:
            # A hint that no longer holds because parameters changed shape or were added, or
            # hinted statistics changed shape, is repaired by the hinted trace itself, and traced
            # again on the repaired hint (checked as strictly); anything else initialises for
            # real. Either way the thrown-away attempts are timed as ``stale``.
            try:
                try:
                    plan, traced, closed, out_shape, t0 = attempt(hint, t0, repair=True)
                    if extra is not None:  # a hint that is no variables structure is not used at all
                        held = plan.hint_check is not None or plan.init_reused
                        extra["hint"] = "held" if held else "stale"
                except hints.HintRepaired as repaired:
                    t1 = time.perf_counter()
                    timings["stale"] = t1 - t0
                    plan, traced, closed, out_shape, t0 = attempt(repaired.structure, t1)
                    if extra is not None:
                        extra["hint"] = "repaired"
            except Exception:  # the model changed, or the hint is garbage: the usual way says how
                t1 = time.perf_counter()
                timings["stale"] = t1 - t0  # the hinted attempts, thrown away
                if extra is not None:
                    extra["hint"] = "stale"
                plan, traced, closed, out_shape, t0 = attempt(None, t1)
        if extra is not None:
            extra["structure"] = plan.structure
            if plan.hint_check is not None and 0 < len(plan.hint_check.learned) <= MAX_CARRIED:
                extra["initialisers"] = plan.hint_check.learned
    except (CaptureError, _SnapshotOnly):
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | MemoryError):
            raise
        checking.close()
        error = from_exception("trace", exc, workspace, f"tracing {target['name']} failed")
        error.message += loader.skipped_hint(exc) + _linen_hint(exc) + _devices_hint(exc, error.tb or "")
        if check is not None and check.violations:  # the annotation it broke first may say why
            error.message += f" (shape contract: {check.violations[0]['message']})"
        raise error from None
    finally:
        checking.close()
    timings["trace"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    limits.check_jaxpr(closed, request.get("limits"))  # before building: refused, never truncated
    timings["limits"] = time.perf_counter() - t0
    return Traced(path, kind, closed, out_shape, plan, traced, loader, builder, device, concrete)


def build_graph(
    request: dict[str, Any],
    found: Traced,
    workspace: Workspace,
    timings: dict[str, float],
    extra: dict[str, Any] | None = None,
) -> tuple[Any, Any]:
    """The graph of a traced target, and its builder (with the walk recorded for a values run);
    ``extra`` gets the roots its relative paths are relative to."""
    announce(request, "build")
    t0 = time.perf_counter()
    from jaxlsp.graph import collector

    with collector.paused():  # the walk allocates many small objects and frees none
        used_profile = dict(request["profile"])
        if found.builder.generators:
            used_profile["generators"] = found.builder.generators
        return graph_from_jaxpr(
            request,
            found.path,
            workspace,
            timings,
            t0,
            found.closed,
            found.out_shape,
            found.plan,
            found.traced,
            found.loader.imported_files(),
            used_profile,
            found.kind,
            extra if extra is not None else {},
            found.loader.notebook,
            found.device,
        )


def graph_from_jaxpr(
    request: dict[str, Any],
    path: str,
    workspace: Workspace,
    timings: dict[str, float],
    t0: float,
    closed: Any,
    out_shape: Any,
    plan: Any,
    traced: Any,
    files: set[str],
    used_profile: dict[str, Any],
    kind: str,
    extra: dict[str, Any],
    notebook: Any = None,
    device: Any = None,
) -> tuple[Any, Any]:
    """The graph from a traced jaxpr (``t0``: when building started), with XLA's costs when the
    request asks, and its builder (which recorded the walk when a values run follows); ``extra``
    receives the roots its relative paths are relative to; ``notebook``: the loader's notebook
    (its cell and notes) when the target is defined in one; ``device``: the jax device a compiled
    program is made for (None: the default, the CPU)."""
    from jaxlsp.capture.worker import targets
    from jaxlsp.capture.worker.build import GraphBuilder, forwarded_outputs
    from jaxlsp.capture.worker.paths import Spelling
    from jaxlsp.graph.model import Graph

    target = request["target"]
    costs = request.get("costs")
    base = request.get("pathBase") or request.get("workspaceRoot") or os.path.dirname(path)
    spelling = Spelling(str(base), workspace)
    gb = GraphBuilder(
        workspace, plan.scope_mode, spelling, keep_equations=bool(costs), record=request.get("values") is not None
    )
    in_ports, out_ports = gb.build(closed, traced.input_labels, targets.output_labels(plan, traced, out_shape))
    # State outputs are updates: one that is its input passed through changed nothing.
    unchanged = forwarded_outputs(closed)
    out_ports = [p for i, p in enumerate(out_ports) if not (p.role == "state" and i in unchanged)]
    sources = _sources(
        {path, *gb.frame_files, *files, *([request["recipePath"]] if request.get("recipePath") else [])},
        spelling,
        {os.path.realpath(p): cells.digest() for p, cells in workspace.notebooks.items()},
    )
    if notebook is not None:
        gb.coverage.notes.extend(notebook.notes)
    graph = Graph(
        target={"path": spelling.relative(path), "name": str(target["name"]), "kind": kind}
        | ({"cell": notebook.cell} if notebook is not None else {}),
        profile=used_profile,
        versions=dict(versions()),
        coverage=gb.coverage,
        sources=sources,
        inputs=in_ports,
        outputs=out_ports,
        nodes=gb.nodes,
        values=gb.values,
        groups=gb.groups,
        mesh=gb.mesh,
    )
    check = extra.pop("contracts", None)
    if check is not None and check.active:
        graph.contracts = check.section(spelling)
    # Where the relative paths are relative to: for the server's own use, never in the graph file.
    extra["roots"] = {"base": spelling.base, "packages": dict(sorted(spelling.roots.items()))}
    timings["build"] = time.perf_counter() - t0
    if costs:
        announce(request, "costs")
        t0 = time.perf_counter()
        from jaxlsp.capture.worker.costs import measure

        measure(
            graph, gb.eqns, closed, dict(costs), str(used_profile.get("device", "cpu")), bool(used_profile.get("x64"))
        )
        timings["costs"] = time.perf_counter() - t0
    if request.get("compiled"):
        announce(request, "compile")
        t0 = time.perf_counter()
        from jaxlsp.capture.worker.compiled import measure as compile_program

        platform = str(used_profile.get("device", "cpu")).split(":", 1)[0] or "cpu"
        compile_program(graph, closed, traced, device, platform, lambda p: spelling.spell(p)[0])
        timings["compile"] = time.perf_counter() - t0
    return graph, gb


def graph_json(graph: Any, request: dict[str, Any], timings: dict[str, float]) -> dict[str, Any]:
    """The graph's JSON form (as the server reads it), timed as ``serialize``."""
    t0 = time.perf_counter()
    data = to_json(graph, packed=request.get("transport") == "packed")
    timings["serialize"] = time.perf_counter() - t0
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


def configure_jax(device: str, x64: bool, jax_ready: bool, devices: int | None = None) -> Any:
    """Set x64, the platform and the number of CPU devices before any user import; an
    unavailable device is ``refused``.

    ``devices``: N virtual CPU devices (``--xla_force_host_platform_device_count``), which only
    take effect before the XLA backend starts. A forked capture of the warm spare starts its own
    backend (the spare never does), so every capture gets the count it asks for; a process whose
    backend already runs with another count refuses rather than trace with the wrong one.
    Returns the device to trace under (None for the CPU: tracing needs no backend at all).
    """
    from jaxlsp.capture.worker import jaxcompat

    if device != "cpu" and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise CaptureError("refused", f"unknown device {device!r}: expected 'cpu' or 'cuda:N'")
    if devices is not None and device != "cpu":
        raise CaptureError(
            "refused", f"devices = {devices} makes virtual CPU devices; the profile's device is {device}"
        )
    try:
        import jax
    except ImportError as exc:
        raise CaptureError("refused", f"jax is not installed in this interpreter: {exc}") from None
    config: Any = jax.config
    config.update("jax_enable_x64", bool(x64))
    initialised = jaxcompat.backends_initialized()
    if devices is not None:
        _cpu_devices(config, devices, initialised)
    if device == "cpu":
        if not initialised:
            config.update("jax_platforms", "cpu")
        return None
    index = int(device[5:])
    if not initialised:
        config.update("jax_platforms", "cuda")
    try:
        found = jax.devices("cuda")
    except Exception as exc:
        raise CaptureError("refused", f"device {device} is unavailable: {type(exc).__name__}: {exc}") from None
    if index >= len(found):
        raise CaptureError("refused", f"device {device} is unavailable: only {len(found)} CUDA device(s) found")
    return found[index]


DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def _cpu_devices(config: Any, devices: int, initialised: bool) -> None:
    """Ask XLA for ``devices`` CPU devices (before its backend starts), or check the running one."""
    if initialised:
        import jax

        have = jax.device_count("cpu")
        if have != devices:
            raise CaptureError(
                "refused",
                f"devices = {devices}, but this worker's XLA backend already started with {have} CPU device(s); "
                "the count is fixed when the backend starts: trace in a fresh worker",
            )
        return
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_COUNT_FLAG)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{DEVICE_COUNT_FLAG}={devices}"])
    with contextlib.suppress(AttributeError, KeyError, ValueError, TypeError):
        config.update("jax_num_cpu_devices", devices)  # jax >= 0.4.35; XLA_FLAGS alone before that


def _devices_hint(exc: BaseException, tb: str) -> str:
    """What to set when ``jax.pmap`` maps over more elements than the capture has devices."""
    import re

    found = re.search(r"cannot select an axis to squeeze out .*?got shape=\((\d+)", str(exc))
    if found is None or "pmap" not in tb:
        return ""
    size = int(found.group(1))
    try:
        import jax

        have = jax.device_count()
    except Exception:
        return ""
    if size <= have:
        return ""
    return (
        f"; jax.pmap runs one device per element of its mapped axis ({size} here) and this capture has {have} "
        f"CPU device(s): set devices = {size} in the profile (or jaxlsp trace --devices {size})"
    )


def _linen_hint(exc: BaseException) -> str:
    """What the profile needs for Flax's immutable-collection and missing-rng errors."""
    import re

    name, text = type(exc).__name__, str(exc)
    if name == "ModifyScopeVariableError":
        found = re.search(r'collection "([^"]+)" is immutable', text)
        if found:
            collection = found.group(1)
            return (
                f"; the call updates the {collection} collection: add it to the profile's mutable list "
                f'(mutable = ["{collection}"]) or call the model in inference mode'
            )
    if name == "InvalidRngError":
        found = re.search(r'needs PRNG for "([A-Za-z_][A-Za-z0-9_]*)"', text)
        if found:
            stream = found.group(1)
            return f'; the call draws from the {stream} rng stream: add it to the profile\'s rngs (rngs = ["{stream}"])'
    return ""


def _refuse_wide(operands: Any) -> None:
    import jax

    for leaf in jax.tree_util.tree_leaves(operands):
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and str(dtype) in ("float64", "int64", "uint64", "complex128"):
            raise CaptureError(
                "refused",
                f"an input has dtype {dtype} but the profile does not set x64 = true; "
                "JAX would silently narrow it to 32 bits",
            )


def _contracts(request: dict[str, Any], workspace: Workspace) -> Any:
    """The check of the workspace's jaxtyping annotations (worker/contracts.py), when its code
    imported jaxtyping; None otherwise."""
    from jaxlsp.capture.worker import contracts

    if not contracts.uses_jaxtyping():
        return None
    return contracts.Contracts(workspace)


def _sources(paths: set[str], spelling: Any, digests: dict[str, str]) -> dict[str, str]:
    """Spelled path (as frames spell it: relative to the base) -> sha256 of each file; a
    notebook's (in ``digests``) is of its code cells' text, which is what the server compares an
    edited notebook with."""
    out: dict[str, str] = {}
    for p in sorted(paths):
        if os.path.realpath(p) in digests:
            out[spelling.relative(p)] = digests[os.path.realpath(p)]
            continue
        try:
            with open(p, "rb") as f:
                out[spelling.relative(p)] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            continue
    return out


#: The worker's modules every capture of a target imports (the rest only for costs, values, examples...).
CAPTURE_MODULES = (
    "inputs",
    "loading",
    "hints",
    "targets",
    "build",
    "scopes",
    "jaxcompat",
    "limits",
    "priming",
    "initsnap",
)


def warm_capture() -> None:
    """What every capture of a target needs, done before its request (an early worker): the
    package versions, the worker's own modules, JAX's user-frame patterns. No user code."""
    import importlib

    versions()
    for name in CAPTURE_MODULES:
        importlib.import_module(f"jaxlsp.capture.worker.{name}")
    importlib.import_module("jaxlsp.graph.io")
    from jaxlsp.capture.worker import jaxcompat

    jaxcompat.warm()


def warm() -> None:
    """Called once by the warm spare before it forks: precompute what every capture needs.

    The worker's own modules are imported here too, so each forked capture does not pay their
    import again (about 10 ms: half of a small model's graph building)."""
    import importlib

    versions()
    for name in (
        *CAPTURE_MODULES,
        "costs",
        "values.run",
        "firstcall",
        "runners",
        "learned",
        "contracts",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(f"jaxlsp.capture.worker.{name}")
    importlib.import_module("jaxlsp.graph.io")
    importlib.import_module("jaxlsp.graph.compact")  # the result's form (io.to_compact imports it late)
    from jaxlsp.capture.worker import contracts, failures, jaxcompat, replay

    jaxcompat.warm()
    jaxcompat.linear_input_check()
    contracts.warm()
    if "flax.linen" in sys.modules:  # the replay hook set before the forks (replay.install)
        replay.install()
    failures.remember_loaded()  # last: the modules above are loaded now


@functools.cache
def versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in ("jax", "jaxlib", "flax", "equinox"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["python"] = platform.python_version()
    return out


def to_json(graph: Any, packed: bool = False) -> dict[str, Any]:
    """The graph's JSON form (``jaxlsp.graph.io.to_json``), or with ``packed`` the smaller form
    for the pipe to the server (``io.to_compact``: each distinct string, frame and stack once)."""
    from jaxlsp.graph import io

    data: dict[str, Any] = io.to_compact(graph) if packed else io.to_json(graph)
    return data
