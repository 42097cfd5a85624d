"""A request's target loaded, initialised and traced (``trace_target``), and its graph built
(``build_graph``): the pipeline every capture that is not an example run goes through.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from jaxlsp.worker.core.failures import CaptureError, Workspace, from_exception
from jaxlsp.worker.core.phases import announce
from jaxlsp.worker.tracing import limits
from jaxlsp.worker.tracing.assemble import graph_from_jaxpr
from jaxlsp.worker.tracing.devices import configure_jax

if TYPE_CHECKING:
    from jax import Device
    from jax.extend.core import ClosedJaxpr

    from jaxlsp.graph.model import Graph
    from jaxlsp.worker.loading.inputs import InputBuilder
    from jaxlsp.worker.loading.loading import Loader
    from jaxlsp.worker.loading.targets import Plan, Traceable
    from jaxlsp.worker.protocol import ResolvedProfile, WorkerRequest
    from jaxlsp.worker.reuse.hints import InitKey
    from jaxlsp.worker.tracing.build import GraphBuilder
    from jaxlsp.worker.tracing.contracts import Contracts

_Operands = tuple[object, object, object, list[object]]  # Traceable.operands

#: library initialisers' outputs a capture takes from the last one and leaves for the next, at most
MAX_CARRIED = 1024


class SnapshotOnly(BaseException):
    """A ``snapshotOnly`` request's init is done: its snapshot (None: none could be kept). A
    BaseException: no handler of a failed attempt may take it for one."""

    def __init__(self, snapshot: object) -> None:
        super().__init__("snapshot made")
        self.snapshot = snapshot


@dataclass
class Traced:
    """A traced target: its jaxpr, and what made it (for the graph and a values run)."""

    path: str
    kind: str
    closed: ClosedJaxpr
    out_shape: tuple[object, object, object]  # of ``traced.fn``: (out, grads, new_state), abstract
    plan: Plan
    traced: Traceable  # ``fn`` and its ``operands`` (concrete in a values run)
    loader: Loader
    builder: InputBuilder
    device: Device | None  # None: the CPU
    concrete: bool


def trace_target(
    request: WorkerRequest,
    workspace: Workspace,
    timings: dict[str, float],
    jax_ready: bool = False,
    extra: dict[str, object] | None = None,
) -> Traced:
    """Load, initialise and trace the request's target; raises CaptureError. ``extra`` gets the
    variables structure (a hint for the next capture) and whether the request's hint held."""
    from jaxlsp.worker.loading import inputs as inputs_mod
    from jaxlsp.worker.loading import loading, targets
    from jaxlsp.worker.reuse import hints
    from jaxlsp.worker.tracing import jaxcompat

    target = request["target"]
    profile: ResolvedProfile = request["profile"].copy()  # the retry below adds a stream to its rngs
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
    pod = None
    if profile.get("topology"):  # a TPU pod compiled for from here: abstract through and through
        from jaxlsp.worker.tracing import topology

        if concrete:
            raise CaptureError(
                "refused",
                f"topology = {profile['topology']!r} compiles for a pod that is not here: nothing of it runs "
                "(drop --values/--time, or trace without the topology)",
            )
        t1 = time.perf_counter()
        pod = topology.devices(str(profile["topology"]))
        timings["topology"] = time.perf_counter() - t1
        if not profile.get("mesh"):
            raise CaptureError(
                "refused",
                f"topology = {profile['topology']!r} needs a mesh over its {len(pod)} devices "
                f"(mesh = {{ axes = {{ data = {len(pod)} }} }})",
            )
    if profile.get("mesh"):  # the recipe's mesh: after the import, so it wins over one the module set
        where = f"profiles.{profile['name']}.mesh" if profile.get("name") else "the profile's mesh"
        mesh = inputs_mod.make_mesh(profile["mesh"], device, where, pod)
        jax.set_mesh(mesh)  # a capture is one process: the mesh holds for its trace and values run
    builder = inputs_mod.InputBuilder(loader, symbolic, int(profile.get("seed", 0)), concrete=concrete, mesh=mesh)
    transform = profile.get("transform")
    on_device = jax.default_device(device) if device is not None else contextlib.nullcontext()
    # A values or timed run on an accelerator draws its weights and inputs on the host, where JAX
    # runs an init's hundreds of small operations without compiling each one for the chip (the
    # Linen transformer's init: 12.7 s on a v5e, about 1 s here); they then move to the chip in one
    # transfer, and the program itself runs there. The PRNG is counter-based (threefry), so a seed
    # draws the same bits on every device. A mesh's inputs are placed by their shardings instead.
    host_init = _host_init(concrete, device, mesh)
    making = jax.default_device(jax.devices("cpu")[0]) if host_init else on_device
    check = _contracts(request, workspace)
    if check is not None and extra is not None:
        extra["contracts"] = check  # the graph's contracts section (graph_from_jaxpr)
    checking = contextlib.ExitStack()  # the contract check covers construction and the trace
    try:
        checking.enter_context(jaxcompat.cheap_tracer_probes())  # NNX probes tracers on every Variable write
        if check is not None:
            checking.enter_context(check)
        with making if concrete else contextlib.nullcontext():
            made = targets.construction(obj, kind, profile, builder)
            if kind == "function" and made.factory and not target.get("kind"):
                kind = targets.infer_kind(made.model)  # a factory of a function target may make a module
            call_args = builder.call_args(profile.get("inputs"))
        # A jaxtyping check keeps what a trace broke: a hinted trace that is thrown away must not
        # leave its findings there, so targets with annotated functions initialise for real.
        hint = request.get("structureHint") if not concrete and (check is None or not check.checked) else None
        # A replayed call runs none of its Python, so none of its annotated functions' checks:
        # targets with a jaxtyping check trace every call (worker/reuse/replay.py).
        replay = request.get("replay") is not False and (check is None or not check.checked)
        # An NNX or Equinox model's abstract init kept for the next capture (worker/reuse/initsnap.py):
        # a capture uses the last one's snapshot; a ``snapshotOnly`` request (the server's, in the
        # background after a capture that ran the init) makes one and traces nothing. Only in the
        # warm spare's captures, never past a jaxtyping check, which must see the constructor run.
        snapshots = jax_ready and not concrete and (check is None or not check.checked)
        snapshot_only = bool(request.get("snapshotOnly")) and snapshots

        outputs: dict[InitKey, object] = {}  # the initialisers' abstract outputs, for every hinted attempt
        # library initialisers' outputs the last capture of this target met (hints.stable_key)
        carried = request.get("initialisers")
        carried = carried if isinstance(carried, dict) and len(carried) <= MAX_CARRIED else {}

        def attempt(
            hint: object, t0: float, repair: bool = False
        ) -> tuple[Plan, Traceable, ClosedJaxpr, tuple[object, object, object], float]:
            with making if concrete else contextlib.nullcontext():
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
                raise SnapshotOnly(plan.structure)
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
                try:
                    closed, out_shape = jax.make_jaxpr(traced.fn, return_shape=True)(*traced.operands)
                except Exception as exc:
                    stream = targets.params_stream_serves(kind, profile, exc)
                    if stream is None:
                        raise
                    profile["rngs"] = [*profile.get("rngs", []), stream]  # as init's params stream gave it
                    return attempt(hint, t0, repair)
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
    except (CaptureError, SnapshotOnly):
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | MemoryError):
            raise
        checking.close()
        error = from_exception("trace", exc, workspace, f"tracing {target['name']} failed")
        error.message += loader.skipped_hint(exc) + _linen_hint(exc) + _devices_hint(exc, error.tb or "")
        error.skipped = loader.skipped_name(exc)
        if check is not None and check.violations:  # the annotation it broke first may say why
            error.message += f" (shape contract: {check.violations[0]['message']})"
        raise error from None
    finally:
        checking.close()
    timings["trace"] = time.perf_counter() - t0
    if host_init:
        t0 = time.perf_counter()
        traced.operands = _moved(traced.operands, cast("Device", device))
        timings["transfer"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    limits.check_jaxpr(closed, request.get("limits"))  # before building: refused, never truncated
    timings["limits"] = time.perf_counter() - t0
    return Traced(path, kind, closed, out_shape, plan, traced, loader, builder, device, concrete)


def build_graph(
    request: WorkerRequest,
    found: Traced,
    workspace: Workspace,
    timings: dict[str, float],
    extra: dict[str, object] | None = None,
) -> tuple[Graph, GraphBuilder]:
    """The graph of a traced target, and its builder (with the walk recorded for a values run);
    ``extra`` gets the roots its relative paths are relative to."""
    announce(request, "build")
    t0 = time.perf_counter()
    from jaxlsp.graph import collector

    with collector.paused():  # the walk allocates many small objects and frees none
        used_profile: dict[str, object] = dict(request["profile"])
        if found.builder.generators:
            used_profile["generators"] = found.builder.generators
        from jaxlsp.worker.loading import targets
        from jaxlsp.worker.program import requested

        graph, gb = graph_from_jaxpr(
            request,
            found.path,
            workspace,
            timings,
            t0,
            found.closed,
            targets.output_labels(found.plan, found.traced, found.out_shape),
            found.plan,
            found.traced,
            found.loader.imported_files(),
            used_profile,
            found.kind,
            extra if extra is not None else {},
            found.loader.notebook,
        )
        requested.measure(request, graph, gb, found.closed, found.traced, used_profile, timings, found.device)
        return graph, gb


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


def _refuse_wide(operands: object) -> None:
    import jax

    for leaf in jax.tree_util.tree_leaves(operands):
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and str(dtype) in ("float64", "int64", "uint64", "complex128"):
            raise CaptureError(
                "refused",
                f"an input has dtype {dtype} but the profile does not set x64 = true; "
                "JAX would silently narrow it to 32 bits",
            )


def _contracts(request: WorkerRequest, workspace: Workspace) -> Contracts | None:
    """The check of the workspace's jaxtyping annotations (worker/tracing/contracts.py), when its code
    imported jaxtyping; None otherwise."""
    from jaxlsp.worker.tracing import contracts

    if not contracts.uses_jaxtyping():
        return None
    return contracts.Contracts(workspace)


def _host_init(concrete: bool, device: Device | None, mesh: object) -> bool:
    """Whether a capture draws its weights and inputs on the host and moves them to ``device`` after:
    a concrete run on an accelerator whose inputs no mesh places."""
    return concrete and device is not None and device.platform != "cpu" and mesh is None


def _moved(tree: _Operands, device: Device) -> _Operands:
    """``tree`` with its arrays on ``device``, in one transfer (its other leaves as they are)."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.Array)]
    moved = cast("list[object]", jax.device_put([leaves[i] for i in where], device))
    for i, leaf in zip(where, moved, strict=True):
        leaves[i] = leaf
    return cast("_Operands", jax.tree_util.tree_unflatten(treedef, leaves))
