"""Measured time against JAX itself, in one run on the same target (issue 28).

Target: the 12-layer d=256 Flax Linen transformer (benchmarks/models/transformer.py, tokens
int32[2,128], profile ``forward``) on the CPU, or on ``--device cuda:0``.

- bare: a fresh ``python`` that imports jax and the model, makes its parameters (zeros of the
  abstract init's shapes: what they hold does not change a dense model's time), and runs
  ``jax.jit(apply).lower(v, x).compile()`` (its time is the *compile time*), one first call and
  K more (their median is the *step*);
- timed: a capture with ``time`` (``jaxlsp trace --time --repeat K``): the worker's ``time`` phase
  (compiling the traced program, a warm-up run, K runs under ``jax.profiler``, reading the
  profile back and attributing it to the graph's nodes) and the graph's ``time`` section.

Bare and timed runs alternate and each figure is the median of its runs: this shared machine has
slow spells that then hit both sides alike.

Targets: the ``time`` phase <= (K + 2) steps + 1.2 x the compile time, and the attribution covers
>= 95 % of the measured device time (the ops' busy time). Making the profile's real inputs (the
model's seeded init, as a values run makes them: Linen's eager ``init`` dispatches op by op) comes
before the phase and is printed beside it, not counted. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxlsp.capture.engine import TimeOptions, TraceRequest  # noqa: E402
from jaxlsp.capture.launch.options import CaptureOptions  # noqa: E402
from jaxlsp.capture.service import trace_once  # noqa: E402

MODELS = ROOT / "benchmarks" / "models"
STEPS_SLACK = 2  # the warm-up and one step's worth for reading and attributing the profile
COMPILE_SLACK = 1.2
COVERAGE_TARGET = 0.95

BARE = """
import json, statistics, sys, time
import jax, jax.numpy as jnp
sys.path.insert(0, {folder!r})
from transformer import Transformer
device = jax.devices({platform!r})[{index}]
with jax.default_device(device):
    m = Transformer()
    x = jnp.zeros((2, 128), jnp.int32)
    shapes = jax.eval_shape(lambda x: m.init(jax.random.key(0), x), x)
    v = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    jax.block_until_ready(v)
    t0 = time.perf_counter()
    compiled = jax.jit(lambda v, x: m.apply(v, x)).lower(v, x).compile()
    t1 = time.perf_counter()
    jax.block_until_ready(compiled(v, x))
    t2 = time.perf_counter()
    steps = []
    for _ in range({repeat}):
        s = time.perf_counter()
        jax.block_until_ready(compiled(v, x))
        steps.append(time.perf_counter() - s)
print(json.dumps({{"compile": t1 - t0, "first": t2 - t1, "step": statistics.median(steps)}}))
"""


def bare_once(repeat: int, device: str) -> dict[str, float]:
    platform, _, index = device.partition(":")
    code = BARE.format(folder=str(MODELS), repeat=repeat, platform=platform, index=int(index or 0))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900)
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def timed_once(repeat: int, device: str) -> dict[str, Any]:
    request = TraceRequest(
        MODELS / "transformer.py",
        "Transformer",
        MODELS,
        profile="forward",
        device=None if device == "cpu" else device,
        time=TimeOptions(repeat=repeat),
    )
    start = time.perf_counter()
    outcome = trace_once(request, CaptureOptions(timeout=900))
    wall = time.perf_counter() - start
    section = outcome.graph.time
    assert section is not None, "the timed capture has no time section"
    timings = outcome.capture.result.get("timings", {})
    return {"wall": wall, "phase": float(timings["time"]), "init": float(timings.get("init", 0.0)), "time": section}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="bare and timed runs each (default 3)")
    parser.add_argument("--repeat", type=int, default=5, help="K: the runs profiled (default 5)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda:N")
    args = parser.parse_args(argv)
    bare: list[dict[str, float]] = []
    timed: list[dict[str, Any]] = []
    for _ in range(args.runs):
        bare.append(bare_once(args.repeat, args.device))
        timed.append(timed_once(args.repeat, args.device))

    def median(items: list[Any], key: str) -> float:
        return statistics.median(float(item[key]) for item in items)

    compile_s, first, step = median(bare, "compile"), median(bare, "first"), median(bare, "step")
    phase = median(timed, "phase")
    budget = (args.repeat + STEPS_SLACK) * step + COMPILE_SLACK * compile_s
    coverage = min(float(t["time"]["attributed"]) / float(t["time"]["busy"]) for t in timed)
    last = timed[-1]["time"]
    phases = {k: statistics.median(float(t["time"]["phases"][k]) for t in timed) for k in last["phases"]}
    print(f"target: benchmarks/models/transformer.py::Transformer (forward) on {args.device}, K = {args.repeat}")
    print(f"bare:  compile {compile_s:.2f} s (lower + compile), first call {first:.3f} s, step {step * 1e3:.1f} ms")
    print(
        f"timed: time phase {phase:.2f} s (" + ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()) + "); "
        f"its step {float(last['step']) * 1e3:.1f} ms, device busy {float(last['busy']) * 1e3:.1f} ms"
    )
    print(
        f"       making real inputs (the seeded init, before the phase, not counted): {median(timed, 'init'):.2f} s; "
        f"the whole capture {median(timed, 'wall'):.2f} s"
    )
    ok_time = phase <= budget
    ok_cover = coverage >= COVERAGE_TARGET
    print(
        f"time phase {phase:.2f} s vs (K + {STEPS_SLACK}) steps + {COMPILE_SLACK} x compile = {budget:.2f} s: "
        f"{'ok' if ok_time else 'MISSED'}"
    )
    print(f"attribution covers {100 * coverage:.1f} % of the device time (>= {100 * COVERAGE_TARGET:.0f} %): "
          f"{'ok' if ok_cover else 'MISSED'}")  # fmt: skip
    return 0 if ok_time and ok_cover else 1


if __name__ == "__main__":
    raise SystemExit(main())
