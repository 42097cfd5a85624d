"""Capture speed against JAX itself, all measured in one run on the same targets.

Targets: a 12-layer d=256 Flax Linen transformer (benchmarks/models/transformer.py, tokens
int32[2,128]) and its ``jax.grad`` (the sum of the outputs w.r.t. the parameters), plus the
bundled Linen CNN.

- bare: a fresh ``python`` that imports jax and the module, initialises abstractly and calls
  ``jax.make_jaxpr`` (what a user would write by hand); its wall time, and inside it the cold
  trace time (abstract init + make_jaxpr, the first and only call: no cache).
- cold: ``jaxlsp trace`` as a fresh command (interpreter, worker, graph, JSON).
- warm: a capture through the warm spare, the server's path: each capture of a target hints the
  next with the variables structure it found, so a re-trace skips the abstract init, which the
  hinted trace checks as it reads each variable (capture/launch/speculate.py), as when a user re-traces
  in the editor; the
  first of the runs has no hint.
- build: graph building + JSON serialisation in the worker (median of the warm runs).

Bare and warm runs alternate (bare, warm, bare, warm, ...) and each side is the median of its
runs: this shared machine has slow spells of a few seconds, which then hit both sides alike
instead of whichever happened to run during them.

Targets (DESIGN.md §4): warm <= 0.5 x bare; build <= 0.2 x the cold trace. Exit status 1 when
one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxlsp.capture.engine import TraceRequest
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.service import CaptureService

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "benchmarks" / "models"
WARM_TARGET = 0.5
BUILD_TARGET = 0.2

BARE = """
import json, sys, time
t0 = time.perf_counter()
import jax, jax.numpy as jnp
sys.path.insert(0, {folder!r})
import {module} as mod
t1 = time.perf_counter()
m = mod.{cls}()
x = jax.ShapeDtypeStruct({shape!r}, jnp.{dtype})
t2 = time.perf_counter()
v = jax.eval_shape(lambda x: m.init(jax.random.key(0), x), x)
if {grad!r}:
    jaxpr = jax.make_jaxpr(jax.grad(lambda v, x: m.apply(v, x).sum()))(v, x)
else:
    jaxpr = jax.make_jaxpr(lambda v, x: m.apply(v, x))(v, x)
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "trace": t3 - t2, "eqns": len(jaxpr.eqns)}}))
"""


@dataclass
class Case:
    label: str
    folder: Path
    module: str
    cls: str
    shape: tuple[int, ...]
    dtype: str
    grad: bool
    profile: str

    @property
    def file(self) -> Path:
        return self.folder / f"{self.module}.py"


CASES = [
    Case("transformer", MODELS, "transformer", "Transformer", (2, 128), "int32", False, "forward"),
    Case("transformer grad", MODELS, "transformer", "Transformer", (2, 128), "int32", True, "grad"),
    Case("linen cnn", ROOT / "examples", "linen_cnn", "CNN", (4, 28, 28, 1), "float32", False, "cnn"),
]


Run = tuple[float, dict[str, Any]]  # wall time, and what the run measured inside


def bare_once(case: Case) -> Run:
    """One run of the bare script."""
    code = BARE.format(
        folder=str(case.folder), module=case.module, cls=case.cls, shape=case.shape, dtype=case.dtype, grad=case.grad
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    return time.perf_counter() - start, json.loads(out.stdout.strip().splitlines()[-1])


def median_run(runs: list[Run]) -> Run:
    """The median run by wall time."""
    return sorted(runs, key=lambda run: run[0])[len(runs) // 2]


def cold_cli(case: Case) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "jaxlsp", "trace", f"{case.file}::{case.cls}", "--profile", case.profile],
        cwd=case.folder,
        capture_output=True,
        check=True,
        timeout=300,
    )
    return time.perf_counter() - start


async def warm_and_bare(cases: list[Case], repeat: int) -> dict[str, tuple[list[Run], list[Run]]]:
    """Per case: the warm captures (the server's capture service: gate, queue, warm spare, each
    capture hinting the next) and the bare runs, alternating."""
    service = CaptureService()
    try:
        if not await service.pool.start(sys.executable):
            raise SystemExit("the warm spare did not start")
        out: dict[str, tuple[list[Run], list[Run]]] = {}
        for case in cases:
            request = TraceRequest(case.file, case.cls, case.folder, profile=case.profile, python=sys.executable)
            prepared = service.prepare(request)
            warm_runs: list[Run] = []
            bare_runs: list[Run] = []
            for _ in range(repeat):
                bare_runs.append(await asyncio.to_thread(bare_once, case))
                started = time.perf_counter()
                outcome = await service.capture(prepared, CaptureOptions(timeout=300))
                wall = time.perf_counter() - started
                if not outcome.ok or outcome.via != "spare":
                    raise SystemExit(f"{case.label}: warm capture failed ({outcome.via}): {outcome.result}")
                warm_runs.append((wall, dict(outcome.result.get("timings", {}))))
            out[case.label] = (warm_runs, bare_runs)
        return out
    finally:
        await service.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="warm captures (and bare runs) per target (median)")
    parser.add_argument("--quick", action="store_true", help="only the transformer forward, 2 warm runs")
    args = parser.parse_args()
    cases = CASES[:1] if args.quick else CASES
    repeat = 2 if args.quick else args.repeat
    measured = asyncio.run(warm_and_bare(cases, repeat))
    ok = True
    print("capture speed (seconds; ratios against the bare script in the same run; medians of alternating runs)")
    for case in cases:
        runs, bare_runs = measured[case.label]
        bare_wall, inside = median_run(bare_runs)
        cold_wall = cold_cli(case)
        warm_wall = statistics.median(w for w, _ in runs)
        build = statistics.median(t.get("build", 0.0) + t.get("serialize", 0.0) for _, t in runs)
        warm_ratio = warm_wall / bare_wall
        cold_trace = statistics.median(measured_inside["trace"] for _, measured_inside in bare_runs)
        build_ratio = build / cold_trace
        ok = ok and warm_ratio <= WARM_TARGET and build_ratio <= BUILD_TARGET
        print(
            f"  {case.label:<17} {inside['eqns']:>5} eqns | bare {bare_wall:5.2f} (cold trace {cold_trace:.2f}) | "
            f"jaxlsp trace {cold_wall:5.2f} ({cold_wall / bare_wall:.2f}x) | warm {warm_wall:5.2f} "
            f"({warm_ratio:.2f}x, target <= {WARM_TARGET}) | build+json {build:.3f} "
            f"({build_ratio:.2f}x cold trace, target <= {BUILD_TARGET})"
        )
        print(
            f"  {'':<17} runs: bare [{' '.join(f'{w:.2f}' for w, _ in bare_runs)}] "
            f"warm [{' '.join(f'{w:.2f}' for w, _ in runs)}]"
        )
    print("capture ratios " + ("within target" if ok else "MISSED a target"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
