"""A zero-config trace against running its example alone (target: trace <= 1.0 x bare).

``jaxlsp trace FILE::NAME`` with no jaxlsp.toml and no ``--from``, as a new user runs it in a
repository laid out like a real one (tests/workspaces/callsites_repo, copied to a temporary folder
since its tests write files): ``zoo/resnet.py::ResNetBlock`` has no static call site of its own
(it is built inside ``ResNet``), so the trace finds the test that reaches it and runs it up to the
block's first call.

- bare: ``python -m pytest -q -p no:cacheprovider TEST`` in the root, as a user runs that test
  alone (interpreter start, imports, the whole test);
- trace: ``python -m jaxlsp trace zoo/resnet.py::ResNetBlock -o graph.json`` in the root, cold:
  the CLI's start, discovery of the call sites, a fresh capture worker that imports jax, the
  test's run up to the call, the abstract trace and the graph written.

The trace must run that example and nothing else first (its ``running ...`` line names that one
test alone, not "and N more"). Bare and trace runs alternate and each side is the median of its
runs (this shared machine has slow spells that then hit both sides alike). Exit status 1 when
trace > 1.0 x bare or the trace ran anything but the example.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / "tests" / "workspaces" / "callsites_repo"
TARGET = 1.0
TEST = "tests/test_models.py::test_resnet18"
TRACED = "zoo/resnet.py::ResNetBlock"


def timed(args: list[str], root: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=600, check=False
    )  # fmt: skip
    return time.perf_counter() - start, done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3, help="alternating runs per side (default 3)")
    args = parser.parse_args(argv)
    bares: list[float] = []
    traces: list[float] = []
    ran = ""
    with tempfile.TemporaryDirectory(prefix="jaxlsp-zero-config-") as tmp:
        root = Path(tmp) / "callsites_repo"
        shutil.copytree(REPO, root, ignore=shutil.ignore_patterns("__pycache__", "jaxlsp.toml"))
        for _ in range(max(1, args.runs)):
            took, done = timed(["-m", "pytest", "-q", "-p", "no:cacheprovider", TEST], root)
            if done.returncode != 0:
                raise SystemExit(f"the test failed on its own:\n{done.stdout[-2000:]}")
            bares.append(took)
            took, done = timed(["-m", "jaxlsp", "trace", TRACED, "-o", "graph.json"], root)
            if done.returncode != 0:
                raise SystemExit(f"the zero-config trace failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
            traces.append(took)
            ran = next((line for line in done.stdout.splitlines() if line.startswith("running ")), "")
    b, t = statistics.median(bares), statistics.median(traces)
    print(f"zero-config trace benchmark: {TRACED} from {TEST} (Python {sys.version.split()[0]})")
    shown = [", ".join(f"{x:.2f}" for x in runs) for runs in (bares, traces)]
    print(f"    bare:  python -m pytest of that test alone     {b:7.2f} s  (median of {shown[0]})")
    print(f"    trace: jaxlsp trace, no jaxlsp.toml (cold)      {t:7.2f} s  (median of {shown[1]})")
    alone = ran == f"running {TEST} to learn the inputs"
    print(f"    the trace's run: {ran or 'none'} ({'that example alone' if alone else 'NOT that example alone'})")
    ratio = t / b
    ok = ratio <= TARGET and alone
    print(f"zero-config ratio {ratio:.2f} (target <= {TARGET}) {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
