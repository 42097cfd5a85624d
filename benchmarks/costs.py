"""Costs and diffs against the trace itself, measured in one run (issue 18).

Target: the 12-layer d=256 Flax Linen transformer's gradient (benchmarks/models, ``--profile
grad``: 3,286 equations).

- cold trace: abstract init + ``make_jaxpr`` in a fresh bare script (benchmarks/capture.py's), the
  trace's own cost without any of jaxlsp;
- first costs: a capture with ``--costs`` and an empty cache; the worker's ``costs`` phase (every
  distinct equation lowered and analysed, the roll-ups);
- after an edit: the same capture of a copy whose one line changed (``nn.gelu`` -> ``nn.relu`` in
  each block's MLP), with the cache the first run left: only the equations the edit made new are
  lowered;
- diff: ``jaxlsp.graph.diff`` of the two graphs against reading their two files (``io.read``).

Runs alternate (bare, first, edited) and each figure is the median of its runs.

Targets: first costs <= 1 x the cold trace; after an edit <= 0.2 x; the diff <= 0.5 x reading the
two files. Exit status 1 when one is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from capture import CASES, bare_once  # benchmarks/capture.py: the bare script

from jaxlsp.capture.engine import TraceOutcome, TraceRequest
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.service import trace_once
from jaxlsp.graph import io
from jaxlsp.graph.diff import diff

FIRST_TARGET = 1.0
EDIT_TARGET = 0.2
DIFF_TARGET = 0.5
EDIT = ("nn.gelu(h)", "nn.relu(h)")


def capture(folder: Path, cache: Path) -> TraceOutcome:
    os.environ["XDG_CACHE_HOME"] = str(cache)  # where the request sends the worker's cost cache
    request = TraceRequest(folder / "transformer.py", "Transformer", folder, profile="grad", costs=True)
    return trace_once(request, CaptureOptions(timeout=600))


def median_time(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind (median)")
    parser.add_argument("--quick", action="store_true", help="one run of each kind")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    case = next(c for c in CASES if c.label == "transformer grad")
    work = Path(tempfile.mkdtemp(prefix="jaxlsp-bench-costs-"))
    try:
        original, edited = work / "original", work / "edited"
        for folder in (original, edited):
            shutil.copytree(case.folder, folder)
        source = (edited / "transformer.py").read_text()
        assert source.count(EDIT[0]) == 1
        (edited / "transformer.py").write_text(source.replace(*EDIT))
        cold, first, again, lowered = [], [], [], []
        graphs = (work / "a.json", work / "b.json")
        for run in range(repeat):
            cold.append(bare_once(case)[1]["trace"])
            cache = work / f"cache-{run}"
            before = capture(original, cache)
            first.append(before.capture.result["timings"]["costs"])
            after = capture(edited, cache)
            again.append(after.capture.result["timings"]["costs"])
            assert after.graph.costs is not None
            lowered.append(int(after.graph.costs["lowered"]))
            if run == 0:
                io.write(before.graph, graphs[0])
                io.write(after.graph, graphs[1])
        reading = median_time(lambda: [io.read(g) for g in graphs], 5)
        a, b = io.read(graphs[0]), io.read(graphs[1])
        diffing = median_time(lambda: diff(a, b), 5)
        found = diff(a, b)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cold_trace = statistics.median(cold)
    first_ratio = statistics.median(first) / cold_trace
    edit_ratio = statistics.median(again) / cold_trace
    diff_ratio = diffing / reading
    ok = first_ratio <= FIRST_TARGET and edit_ratio <= EDIT_TARGET and diff_ratio <= DIFF_TARGET
    print("costs and diff speed (seconds; medians of alternating runs)")
    print(
        f"  transformer grad {len(a.nodes):>5} eqns | cold trace {cold_trace:.2f} | first costs "
        f"{statistics.median(first):.2f} ({first_ratio:.2f}x, target <= {FIRST_TARGET}) | after an edit "
        f"{statistics.median(again):.2f} ({edit_ratio:.2f}x, target <= {EDIT_TARGET}; "
        f"{statistics.median(lowered):.0f} equations lowered)"
    )
    print(
        f"  runs: cold trace [{' '.join(f'{t:.2f}' for t in cold)}] first [{' '.join(f'{t:.2f}' for t in first)}] "
        f"edited [{' '.join(f'{t:.2f}' for t in again)}]"
    )
    print(
        f"  diff of {len(a.nodes):,} and {len(b.nodes):,} nodes {diffing * 1000:.1f} ms against reading the two "
        f"files {reading * 1000:.1f} ms ({diff_ratio:.2f}x, target <= {DIFF_TARGET}): {found.summary()}"
    )
    print("costs ratios " + ("within target" if ok else "MISSED a target"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
