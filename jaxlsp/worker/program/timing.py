"""Measured time (``jaxlsp trace --time``, ``time: true``): the traced program compiled, run on the
profile's real inputs (made as for a values run) once to warm up and then ``repeat`` times under
``jax.profiler``, the profile read back (``devicetime``) and each HLO op's device time attributed
to the graph's nodes (``jaxlsp.graph.timing``) through the compiled program's metadata
(``hlo``). Runs in the user's interpreter, after the graph and its costs are built.

Nothing here assumes the CPU: the profiler's events are read by the HLO names their stats (or, on
a TPU, their names) carry, on an accelerator's own timeline when it has one (``--device cuda:0``,
``tpu``), else on the host's threads.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from jaxlsp.graph import timing as graph_timing
from jaxlsp.graph.model import Graph
from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.program import devicetime

if TYPE_CHECKING:
    import jax
    from jax.extend.core import ClosedJaxpr
    from jax.profiler import ProfileData
    from jax.stages import Compiled, Lowered

    from jaxlsp.worker.loading.targets import Traceable

DEFAULT_REPEAT = 5
MAX_REPEAT = 1000
WARMUP = 1
_MODULE_NAME = re.compile(r"^HloModule\s+([^\s,]+)")
# On a GPU, XLA records runs of kernels as CUDA graphs (command buffers), which the profiler
# times as one launch: off for a timed compile, so each kernel is seen with its op's name.
GPU_OPTIONS: dict[str, str | bool] = {"xla_gpu_enable_command_buffer": ""}


def measure(
    graph: Graph,
    closed: ClosedJaxpr,
    traced: Traceable,
    options: Mapping[str, object],
    device: jax.Device | None,
    where: str = "cpu",
) -> None:
    """Fill ``graph.time``; ``closed``: the traced program (the jaxpr the graph was built from),
    ``traced``: the function ``make_jaxpr`` traced and its concrete ``operands``; ``device``: the
    device to run on (None: the CPU), ``where`` the profile's name for it (``cuda:0``). Raises
    CaptureError naming what failed."""
    import jax

    repeat = int(cast("int", options.get("repeat", DEFAULT_REPEAT)))  # TimeRequest.repeat
    if not 1 <= repeat <= MAX_REPEAT:
        raise CaptureError("refused", f"time: repeat must be from 1 to {MAX_REPEAT}, got {repeat}")
    platform = "cpu" if device is None else str(device.platform)
    on_device = jax.default_device(device) if device is not None else contextlib.nullcontext()
    notes: list[str] = []
    operands = traced.operands
    leaves = jax.tree_util.tree_leaves(operands)
    shapes = [i for i, x in enumerate(leaves) if isinstance(x, jax.ShapeDtypeStruct)]
    if shapes:
        raise CaptureError(
            "refused",
            f"time: the program needs real arrays, and {len(shapes)} of its {len(leaves)} inputs are only shapes "
            "(an init or inputs factory returned jax.ShapeDtypeStruct): return arrays from the factory to time it",
        )
    with on_device:
        t0 = time.perf_counter()
        try:
            call, args = _lowered(traced.fn, operands, closed, leaves)
            compiled = _compile(call, platform, notes)
        except Exception as exc:
            raise CaptureError("trace", f"time: compiling the program failed: {type(exc).__name__}: {exc}") from None
        compile_seconds = time.perf_counter() - t0
        text = cast("str", compiled.as_text())  # None only for a program that has no HLO
        found = _MODULE_NAME.match(text)
        module = found.group(1) if found else None
        phases = {"compile": compile_seconds}
        try:
            ready: Callable[[object], object] = jax.block_until_ready  # untyped in jax
            t0 = time.perf_counter()
            for _ in range(WARMUP):
                ready(compiled(*args))
            phases["warmup"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            steps, data = _profiled(compiled, args, repeat)
            phases["profiled"] = time.perf_counter() - t0
        except CaptureError:
            raise
        except Exception as exc:
            raise CaptureError("trace", f"time: running the program failed: {type(exc).__name__}: {exc}") from None
    t0 = time.perf_counter()
    try:
        times = devicetime.read(data, module)
    except devicetime.ProfileError as exc:
        raise CaptureError("trace", f"time: {exc}") from None
    if platform != "cpu" and times.where != "device":
        needs = (
            "the TPU's plane (/device:TPU:N) comes with libtpu's profiler"
            if platform == "tpu"
            else "the GPU profiler needs CUPTI (jax's CUDA plugin ships it)"
        )
        raise CaptureError(
            "trace",
            f"time: the profiler recorded no kernel of the program on {where}'s own timeline (only the host's "
            f"launches, which are not the device's time): {needs}",
        )
    phases["read"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    devices = max(1, len(times.busy))
    per_step = 1.0 / (repeat * devices)
    mapped = ops_to_nodes(text, graph)
    ops = []
    for name, seconds in times.ops.items():
        opcode, nodes, via = mapped.get(name, ("", [], ""))
        ops.append(graph_timing.Op(name, opcode, seconds * per_step, times.counts.get(name, 0), nodes, via))
    if times.others:
        notes.append(f"other programs ran while profiling and are left out: {', '.join(times.others[:5])}")
    graph.time = graph_timing.section(
        graph,
        ops,
        step=sum(steps) / len(steps),
        steps=steps,
        busy=times.total * per_step,
        compile_seconds=compile_seconds,
        repeat=repeat,
        warmup=WARMUP,
        device=where,
        devices=devices,
        timeline=times.where,
        notes=notes,
    )
    phases["attribute"] = time.perf_counter() - t0
    graph.time["phases"] = {k: round(v, 4) for k, v in phases.items()}


def _lowered(
    fn: Callable[..., object], operands: Sequence[object], closed: ClosedJaxpr, leaves: list[object]
) -> tuple[Lowered, list[object]]:
    """The program lowered, and the arguments its compiled form takes. The very function
    ``make_jaxpr`` traced, on the same operands, lowers from JAX's trace cache (no second trace of
    the model); when that fails (a function JAX cannot jit as it is), the jaxpr itself, whose
    equations keep their source positions and name stacks for the HLO's metadata."""
    import jax

    from jaxlsp.worker.tracing import jaxcompat

    try:
        return jax.jit(fn).lower(*operands), list(operands)
    except Exception:
        return jax.jit(jaxcompat.jaxpr_as_fun(closed)).lower(*leaves), leaves


def _compile(lowered: Lowered, platform: str, notes: list[str]) -> Compiled:
    if platform not in ("cuda", "gpu", "rocm"):
        return lowered.compile()
    try:
        return lowered.compile(GPU_OPTIONS)
    except Exception as exc:  # an XLA that does not know the option: its kernels may then hide in graphs
        notes.append(f"compiled with command buffers ({type(exc).__name__}: the option to turn them off was refused)")
        return lowered.compile()


def _options() -> dict[str, jax.profiler.ProfileOptions]:
    """The profiler's options: no Python call tracing and no HLO protos (the op events are all this
    reads: a third of the trace's size); {} where jax has no ProfileOptions."""
    import jax

    make = getattr(jax.profiler, "ProfileOptions", None)
    if make is None:
        return {}
    options = make()
    with contextlib.suppress(AttributeError):
        options.python_tracer_level = 0
        options.enable_hlo_proto = False
    return {"profiler_options": options}


def _profiled(compiled: Compiled, operands: list[object], repeat: int) -> tuple[list[float], ProfileData]:
    """Run ``compiled`` ``repeat`` times under the profiler: each run's wall seconds (to its
    results being ready) and the profile read back."""
    import jax
    from jax.profiler import ProfileData

    folder = tempfile.mkdtemp(prefix="jaxlsp-time-")
    try:
        try:
            jax.profiler.start_trace(folder, **_options())
        except RuntimeError as exc:  # the user's code left a trace running
            raise CaptureError("refused", f"time: the profiler could not start: {exc}") from None
        steps: list[float] = []
        ready: Callable[[object], object] = jax.block_until_ready  # untyped in jax
        stop: Callable[[], None] = jax.profiler.stop_trace  # untyped in jax
        try:
            for _ in range(repeat):
                t0 = time.perf_counter()
                ready(compiled(*operands))
                steps.append(time.perf_counter() - t0)
        finally:
            stop()
        files = sorted(glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True))
        if not files:
            raise CaptureError("trace", "time: the profiler wrote no trace (no .xplane.pb file)")
        return steps, ProfileData.from_file(files[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def ops_to_nodes(text: str, graph: Graph) -> dict[str, tuple[str, list[str], str]]:
    """HLO instruction name -> (its opcode, the graph node ids it comes from, "" or the
    instruction whose nodes it took), for every instruction of the compiled program's non-fusion
    computations (the ones that run). An op XLA inserted to convert or copy a value, which names
    no equation itself, takes the nodes of the one whose value it moves (``hlomap.value_owners``)."""
    from jaxlsp.worker.program import hlo, hlomap

    module = hlo.parse_module(text)
    mapped = hlomap.map_module(module, graph.nodes)
    owners = hlomap.value_owners(module, mapped)
    out: dict[str, tuple[str, list[str], str]] = {}
    for instr in module.instructions():
        if instr.opcode == "parameter":
            continue
        ids, via = owners.get(instr.name, (mapped.get(instr.name, []), ""))
        out[instr.name] = (instr.opcode, ids, via)
    return out
