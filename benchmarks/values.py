"""Values runs against a plain eager call of the same target, in one process, on the same inputs.

Targets: the 12-layer d=256 Flax Linen transformer (benchmarks/models/transformer.py, tokens
int32[2,128]) forward and its gradient profile, and the Equinox scan RNN (examples/eqx_scan.py)
at a working size (benchmarks/models/jaxlsp.toml ``rnn``: 512 steps of 128 features through a
512-wide GRU cell, 4 MB of parameters; the example's own 12 steps of a 32-wide cell hold less
memory than the statistics a values run returns, about a kilobyte per value).

For each target the worker's own code loads it, materialises the profile's inputs (seeded
generators, a seeded init) and traces it, as ``jaxlsp trace --values`` does. Then, in this one
process and on those same arrays:

- eager: the target called under ``jax.disable_jit()`` (every operation dispatched on its own);
- values: the values run (``jaxlsp/worker/values/run.py``): the equation-by-equation
  interpreter, statistics on every value, the replay validation (a direct call of the target),
  the first non-finite search and, for the gradient, the norms per parameter and module.

Both are warmed once first (each operation's first dispatch compiles it), then they alternate
(eager, values, eager, ...) and each side is the median of its runs.

Cost is CPU time of the whole process (``time.process_time``: every thread, XLA's included);
wall time is printed beside it. On this shared two-core machine other jobs stretch wall times
by several times from one run to the next, while CPU time stays put.

Peak memory is what the call holds at its peak: its operands (the parameters and inputs, on the
device before either call starts) plus the most it allocates on top, sampled by a thread
reading the C heap's bytes in use (``mallinfo2``: XLA's CPU buffers and numpy's arrays live
there) every 0.2 ms during the call, above the level before it.

Targets (issue 17): values cost <= 3 x eager cost and values peak memory <= 2 x eager peak
memory. Exit status 1 when one is missed.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIME_TARGET = 3.0
MEMORY_TARGET = 2.0


@dataclass
class Case:
    label: str
    file: Path
    name: str
    profile: str
    recipe: Path | None = None


CASES = [
    Case("transformer", ROOT / "benchmarks" / "models" / "transformer.py", "Transformer", "forward"),
    Case("transformer grad", ROOT / "benchmarks" / "models" / "transformer.py", "Transformer", "grad"),
    Case(
        "eqx scan rnn",
        ROOT / "examples" / "eqx_scan.py",
        "ScanRNN",
        "rnn",
        ROOT / "benchmarks" / "models" / "jaxlsp.toml",
    ),
]


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


class HeapSampler:
    """The peak of the C heap's bytes in use during a call, above its level before the call."""

    def __init__(self) -> None:
        self.libc: Any = None
        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.mallinfo2.restype = _MallInfo2
            self.libc = libc
        except (OSError, AttributeError):
            pass

    def used(self) -> int:
        info = self.libc.mallinfo2()
        return int(info.uordblks + info.hblkhd)

    def peak(self, call: Callable[[], Any]) -> tuple[float, float, int | None]:
        """(CPU seconds, wall seconds, peak bytes above the start) of ``call()``; None bytes
        without glibc."""
        if self.libc is None:
            c0, t0 = time.process_time(), time.perf_counter()
            call()
            return time.process_time() - c0, time.perf_counter() - t0, None
        base = self.used()
        top = [base]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                top[0] = max(top[0], self.used())
                time.sleep(0.0002)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            call()
        finally:
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            top[0] = max(top[0], self.used())
            done.set()
            thread.join()
        return cpu, wall, top[0] - base


def prepare(case: Case) -> tuple[Callable[[], Any], Callable[[], Any], dict[str, Any]]:
    """(eager call, values run, facts) for a case, everything built by the worker's own code."""
    import jax

    from jaxlsp.capture.engine import TraceRequest
    from jaxlsp.capture.engine import prepare as prepare_request
    from jaxlsp.worker.core.failures import Workspace
    from jaxlsp.worker.process import trace as main
    from jaxlsp.worker.values import run as values_run

    req = TraceRequest(file=case.file, name=case.name, workspace_root=ROOT, profile=case.profile, recipe=case.recipe)
    request = dict(prepare_request(req).request)
    request["values"] = {}
    workspace = Workspace(str(ROOT))
    timings: dict[str, float] = {}
    found = main.trace_target(request, workspace, timings)
    assert found is not None
    graph, builder = main.build_graph(request, found, workspace, timings)
    traced = found.traced

    def eager() -> Any:
        with jax.disable_jit():
            return jax.block_until_ready(traced.fn(*traced.operands))

    def values() -> Any:
        values_run.run(graph, builder, traced, request, found.device, time.monotonic(), {})
        return graph.execution

    operands = sum(int(getattr(x, "nbytes", 0)) for x in jax.tree_util.tree_leaves(traced.operands))
    facts = {"ops": len(graph.nodes), "values": len(graph.values), "operands": operands}
    return eager, values, facts


def measure(case: Case, runs: int, sampler: HeapSampler) -> dict[str, Any]:
    eager, values, facts = prepare(case)
    t0 = time.perf_counter()
    eager()
    facts["eagerCold"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    execution = values()
    facts["valuesCold"] = time.perf_counter() - t0
    facts["validation"] = execution["validation"]["status"] if execution else "?"
    cpu: dict[str, list[float]] = {"eager": [], "values": []}
    wall: dict[str, list[float]] = {"eager": [], "values": []}
    memory: dict[str, list[int]] = {"eager": [], "values": []}
    for _ in range(runs):
        for side, call in (("eager", eager), ("values", values)):
            seconds, elapsed, peak = sampler.peak(call)
            cpu[side].append(seconds)
            wall[side].append(elapsed)
            if peak is not None:
                memory[side].append(facts["operands"] + peak)
    facts["cpu"], facts["wall"] = cpu, wall
    for side in ("eager", "values"):
        facts[side] = statistics.median(cpu[side])
        facts[f"{side}Wall"] = statistics.median(wall[side])
        facts[f"{side}Peak"] = statistics.median(memory[side]) if memory[side] else None
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="alternating runs per side (median)")
    parser.add_argument(
        "--quick", action="store_true", help="one run per side, the example's small RNN only (the tests' smoke run)"
    )
    args = parser.parse_args(argv)
    from jaxlsp.worker.tracing.devices import configure_jax

    configure_jax("cpu", False, False)
    sampler = HeapSampler()
    # The quick mode (the tests' smoke run): the example's own small profile, one run per side.
    quick = Case("eqx scan rnn", ROOT / "examples" / "eqx_scan.py", "ScanRNN", "rnn")
    cases = [quick] if args.quick else CASES
    runs = 1 if args.quick else args.runs
    print(f"values runs against eager calls ({runs} alternating runs per side, medians)")
    ok = True
    for case in cases:
        f = measure(case, runs, sampler)
        ratio = f["values"] / f["eager"]
        wall_ratio = f["valuesWall"] / f["eagerWall"]
        line = (
            f"{case.label:<17} {f['ops']:>5} ops | cpu eager {f['eager']:6.3f}s values {f['values']:6.3f}s"
            f" ({ratio:.2f}x, target <= {TIME_TARGET:g}x) | wall {f['eagerWall']:6.3f}s {f['valuesWall']:6.3f}s"
            f" ({wall_ratio:.2f}x)"
        )
        ok = ok and ratio <= TIME_TARGET
        if f["eagerPeak"] is not None and f["valuesPeak"] is not None:
            mem = f["valuesPeak"] / max(f["eagerPeak"], 1)
            line += (
                f" | peak eager {f['eagerPeak'] / 1e6:.1f} MB values {f['valuesPeak'] / 1e6:.1f} MB"
                f" ({mem:.2f}x, target <= {MEMORY_TARGET:g}x)"
            )
            ok = ok and mem <= MEMORY_TARGET
        print(line)
        cpu_runs = " ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(f["cpu"]["eager"], f["cpu"]["values"], strict=True))
        print(
            f"{'':<19}cpu runs eager/values: {cpu_runs}; operands {f['operands'] / 1e6:.1f} MB; first calls: "
            f"eager {f['eagerCold']:.2f}s values {f['valuesCold']:.2f}s; validation {f['validation']}"
        )
    print("values ratios within target" if ok else "values ratios MISSED a target")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
