"""How much of an NNX or Equinox re-trace is the abstract init: the measurement behind the init
reuse that issue 29 asks for beyond Linen's structure hint (capture/worker/targets.py).

A warm re-trace of a Linen model skips its abstract init (the last capture's variables structure,
checked as the call reads it); an NNX or Equinox model is built again under ``nnx.eval_shape`` /
``eqx.filter_eval_shape`` on every capture. This script builds the decoders of
benchmarks/models/module_lms.py at two depths, in one fresh interpreter per (kind, depth), with
the worker's own settings (its relaxed collector thresholds and O(1) tracer probes,
capture/worker/jaxcompat.py), and prints per row the abstract init's and ``make_jaxpr``'s seconds,
init / trace, and the slope of each over the two depths (log time over log depth; 1.0 is linear).
It also runs the NNX init once without the tracer probes: NNX reads ``tracer.sharding`` on every
Variable it makes, and JAX builds that attribute's error message from the whole trace so far.

No goal is checked (exit status 0): it tells what an init reuse for NNX and Equinox would save.
``--depths A,B`` (default 16,64).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
MODELS = BENCHMARKS / "models"

RUN = """
import gc, json, sys, time
sys.path.insert(0, {models!r})
import jax, jax.numpy as jnp
import module_lms
gc.freeze()
gc.set_threshold(50_000, 50, 100)  # as the worker traces (capture/worker/main.py)
if {probes!r}:
    from jaxlsp.capture.worker import jaxcompat
    probes = jaxcompat.cheap_tracer_probes()  # held: a collected context manager undoes its patch
    probes.__enter__()
t0 = time.perf_counter()
model, call, x = module_lms.abstract({kind!r}, {depth!r})
t1 = time.perf_counter()
closed = jax.make_jaxpr(call)(model, x)
t2 = time.perf_counter()
print(json.dumps({{"init": t1 - t0, "trace": t2 - t1, "eqns": len(closed.jaxpr.eqns)}}), flush=True)
"""


def measure(kind: str, depth: int, probes: bool = True) -> dict[str, float]:
    code = RUN.format(models=str(MODELS), kind=kind, depth=depth, probes=probes)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} depth {depth} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def slope(small: float, large: float, depths: tuple[int, int]) -> float:
    return math.log(large / small) / math.log(depths[1] / depths[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="16,64")
    args = parser.parse_args()
    a, b = (int(d) for d in args.depths.split(","))
    print(f"  {'kind':<9}{'depth':>6}{'eqns':>7}{'init s':>8}{'trace s':>9}{'init/trace':>11}")
    for kind in ("nnx", "equinox"):
        rows = [measure(kind, depth) for depth in (a, b)]
        for depth, row in zip((a, b), rows, strict=True):
            ratio = row["init"] / row["trace"]
            print(f"  {kind:<9}{depth:>6}{row['eqns']:>7.0f}{row['init']:>8.2f}{row['trace']:>9.2f}{ratio:>11.2f}")
        grow_init = slope(rows[0]["init"], rows[1]["init"], (a, b))
        grow_trace = slope(rows[0]["trace"], rows[1]["trace"], (a, b))
        print(f"  {kind:<9}slopes: init {grow_init:.2f}, trace {grow_trace:.2f}")
    plain = [measure("nnx", depth, probes=False)["init"] for depth in (a, b)]
    print(
        f"  nnx init without the tracer probes: {plain[0]:.2f} s at depth {a}, {plain[1]:.2f} s at {b}"
        f" (slope {slope(plain[0], plain[1], (a, b)):.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
