"""What ``--compiled`` adds to a trace, against compiling the same program by hand (issue 28).

Targets: the 12-layer d=256 Flax Linen transformer (benchmarks/models), forward (``--profile
forward``) and its gradient (``--profile grad``), on the CPU.

- bare compile: in a fresh script, after the abstract init and the trace, the time of
  ``jax.jit(f).lower(v, x).compile()`` alone (what any user pays to get the compiled program);
- added by ``--compiled``: a capture with ``compiled`` against the same capture without, in the
  same run: the worker's ``compile`` phase (lowering the traced program, compiling it, reading the
  HLO text back, mapping it onto the graph) plus the extra serialisation of the larger graph.

Runs alternate (bare, plain, compiled) and each figure is the median of its runs.

Target: added <= 1.2 x the bare compile. Exit status 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from capture import CASES, Case  # benchmarks/capture.py: the transformer cases

from jaxlsp.capture.engine import TraceOutcome, TraceRequest
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.service import trace_once

TARGET = 1.2

BARE_COMPILE = """
import json, sys, time
import jax, jax.numpy as jnp
sys.path.insert(0, {folder!r})
import {module} as mod
m = mod.{cls}()
x = jax.ShapeDtypeStruct({shape!r}, jnp.{dtype})
v = jax.eval_shape(lambda x: m.init(jax.random.key(0), x), x)
if {grad!r}:
    f = jax.grad(lambda v, x: m.apply(v, x).sum())
else:
    f = lambda v, x: m.apply(v, x)
jax.make_jaxpr(f)(v, x)
t0 = time.perf_counter()
compiled = jax.jit(f).lower(v, x).compile()
t1 = time.perf_counter()
print(json.dumps({{"compile": t1 - t0}}))
"""


def bare_compile(case: Case) -> float:
    code = BARE_COMPILE.format(
        folder=str(case.folder), module=case.module, cls=case.cls, shape=case.shape, dtype=case.dtype, grad=case.grad
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["compile"])


def capture(case: Case, compiled: bool) -> TraceOutcome:
    request = TraceRequest(case.file, case.cls, case.folder, profile=case.profile, compiled=compiled)
    return trace_once(request, CaptureOptions(timeout=600))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind (median)")
    parser.add_argument("--quick", action="store_true", help="one run of the forward case")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    cases = [c for c in CASES if c.label in (("transformer",) if args.quick else ("transformer", "transformer grad"))]
    ok = True
    print("compiled program overhead (seconds; medians of alternating runs)")
    for case in cases:
        bare, added, phases = [], [], []
        splits: list[dict[str, float]] = []
        collectives = fusions = 0
        for _ in range(repeat):
            bare.append(bare_compile(case))
            start = time.perf_counter()
            plain = capture(case, compiled=False)
            plain_wall = time.perf_counter() - start
            start = time.perf_counter()
            made = capture(case, compiled=True)
            compiled_wall = time.perf_counter() - start
            timings = made.capture.result["timings"]
            extra_serialise = timings.get("serialize", 0.0) - plain.capture.result["timings"].get("serialize", 0.0)
            added.append(timings["compile"] + max(0.0, extra_serialise))
            phases.append((plain_wall, compiled_wall))
            section = made.graph.compiled or {}
            splits.append(dict(section.get("seconds") or {}))
            if section.get("error"):
                raise SystemExit(f"{case.label}: the compile failed: {section['error']}")
            collectives = len(section.get("collectives", []))
            fusions = int(section.get("fusionCount", 0))
        ratio = statistics.median(added) / statistics.median(bare)
        ok = ok and ratio <= TARGET
        print(
            f"  {case.label:<16} | bare compile {statistics.median(bare):.2f} | added by --compiled "
            f"{statistics.median(added):.2f} ({ratio:.2f}x, target <= {TARGET}) | {fusions} fusions, "
            f"{collectives} collectives"
        )
        print(
            f"  runs: bare [{' '.join(f'{t:.2f}' for t in bare)}] added [{' '.join(f'{t:.2f}' for t in added)}] "
            f"capture walls plain/compiled [{' '.join(f'{a:.2f}/{b:.2f}' for a, b in phases)}]"
        )
        keys = ("lower", "compile", "read", "map")
        print(
            "  worker phases (medians): "
            + ", ".join(f"{k} {statistics.median(float(s.get(k, 0.0)) for s in splits):.2f}" for k in keys)
        )
    print("compiled ratios " + ("within target" if ok else "MISSED a target"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
