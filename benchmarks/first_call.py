"""A capture at a call site against running that example alone (target: warm <= 1.0 x bare).

The example is a pytest test of a repository laid out like a real one (tests/workspaces/
callsites_repo, copied to a temporary folder since its tests write files); the target is a model
the test reaches inside another one's ``init`` (``zoo/resnet.py::ResNetBlock`` inside
``ResNet18``, from ``tests/test_models.py::test_resnet18``).

- bare: ``python -m pytest -q -p no:cacheprovider TEST`` in the root, as a user runs that test
  alone (interpreter start, imports, the whole test);
- warm: the capture of the target at its first call in that test, through the warm spare (the
  server's path): the example's own run up to the call, the abstract trace and the graph. The
  spare has imported jax already; the example's imports and everything it does before the call
  are paid in full, and nothing after the call is.

Bare and warm runs alternate and each side is the median of its runs (this shared machine has
slow spells that then hit both sides alike). Exit status 1 when warm > 1.0 x bare.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.recipes.examples import parse_example

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / "tests" / "workspaces" / "callsites_repo"
TARGET = 1.0
TEST = "tests/test_models.py::test_resnet18"


def request(root: Path, target: str, example: str) -> dict[str, Any]:
    rel, _, name = target.partition("::")
    profile = {"name": None, "device": "cpu", "seed": 0, "x64": False, "inputs": {}, "load": "module"}
    profile["example"] = parse_example(example, root)
    return {"target": {"path": str(root / rel), "name": name}, "profile": profile, "workspaceRoot": str(root)}


def bare(root: Path, test: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the test failed on its own:\n{done.stdout[-2000:]}")
    return took


async def measure(root: Path, target: str, test: str, runs: int) -> tuple[list[float], list[float], dict[str, float]]:
    pool = SparePool()
    bares: list[float] = []
    warms: list[float] = []
    timings: dict[str, float] = {}
    try:
        if not await pool.start(sys.executable):
            raise SystemExit("the warm spare did not start")
        for _ in range(runs):
            bares.append(await asyncio.to_thread(bare, root, test))
            start = time.perf_counter()
            outcome = await pool.capture(request(root, target, test), sys.executable, CaptureOptions(300))
            warms.append(time.perf_counter() - start)
            if not outcome.result.get("ok") or outcome.via != "spare":
                raise SystemExit(f"the warm capture failed ({outcome.via}): {outcome.result.get('error')}")
            timings = dict(outcome.result.get("timings", {}))
    finally:
        await pool.close()
    return bares, warms, timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="alternating runs per side (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jaxlsp-first-call-") as tmp:
        root = Path(tmp) / "callsites_repo"
        shutil.copytree(REPO, root, ignore=shutil.ignore_patterns("__pycache__"))
        bares, warms, timings = asyncio.run(measure(root, "zoo/resnet.py::ResNetBlock", TEST, max(1, args.runs)))
    b, w = statistics.median(bares), statistics.median(warms)
    print(f"first-call capture benchmark: {TEST} reaching zoo/resnet.py::ResNetBlock (Python {sys.version.split()[0]})")
    shown = [", ".join(f"{x:.2f}" for x in runs) for runs in (bares, warms)]
    print(f"    bare: python -m pytest of that test alone   {b:7.2f} s  (median of {shown[0]})")
    print(f"    warm: capture at the first call (spare)     {w:7.2f} s  (median of {shown[1]})")
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in timings.items())
    print(f"    the last warm capture's phases: {phases}")
    ratio = w / b
    print(f"first-call ratio {ratio:.2f} (target <= {TARGET}) {'ok' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
