"""The graph file's bytes per equation and the server's memory and answers holding a big graph
(issue 29: <= 250 bytes an equation; at 200,000 equations RSS <= 1 GB and page / hover answers
<= 100 ms p99 while the graph is exported).

Per graph (a 60,000-op chain as the robustness suite makes it, and transformer-shaped graphs of
60,000 and 200,000 equations with six-deep frame stacks, as ``tests/graph/test_compact.py`` makes
them): the expanded (version 1) and compact (version 2) file sizes; then, in a fresh interpreter,
what the server does with a worker's result (parse the compact JSON, check it with
``io.from_json``, keep it with ``GraphStore.build``), its VmRSS after, and while a thread streams
the expanded export again and again, the latency of a page of the top level, a page of a group,
the nodes at a source line (a hover's lookup) and a node by id. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BYTES_BAR = 250.0
RSS_BAR_MB = 1024.0
P99_BAR_MS = 100.0
SIZES = {"chain": [60_000], "transformer": [60_000, 200_000]}


def make_text(kind: str, equations: int) -> tuple[str, str]:
    from jaxlsp.graph import io
    from tests.graph.test_compact import realistic_graph
    from tests.robustness.test_load import synthetic_graph

    if kind == "chain":
        graph = synthetic_graph(equations, path="model.py")
        graph.versions = {key: "0" for key in io.VERSION_KEYS}
    else:
        graph = realistic_graph(equations, layers=max(12, equations // 2_000))
    return io.dumps(graph), io.dumps(graph, compact=True)


CHILD = r"""
import gc, json, statistics, sys, threading, time, ctypes
sys.path.insert(0, sys.argv[2])

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0

import jaxlsp.graph.store, jaxlsp.graph.compact, jaxlsp.graph.diff  # what the server has imported
from jaxlsp.graph import io
from jaxlsp.graph.store import GraphStore
base = rss()
text = open(sys.argv[1], encoding="utf-8").read()
t0 = time.perf_counter()
data = json.loads(text)
io.from_json(data)  # finish(): the worker's graph checked (and dropped)
store = GraphStore()
trace = store.keep(GraphStore.build(data, {}))
took = time.perf_counter() - t0
del text, data
gc.collect()
try:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
except OSError:
    pass
held = rss()
exported = threading.Event()
done = threading.Event()

def export():
    import os, tempfile
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    while not done.is_set():
        io.write_text(trace.packed.iter_json(), path)
        exported.set()
    os.unlink(path)

worker = threading.Thread(target=export)
worker.start()
groups = [g.id for g in trace.info.groups]
frames = trace.packed.frames
lines = sorted({(f.path, f.line) for f in frames if f.package is None})
lat = {"page": [], "group page": [], "nodes at a line": [], "node": []}
i = 0
deadline = time.monotonic() + float(sys.argv[3])
try:
    while time.monotonic() < deadline or not exported.is_set():
        i += 1
        top = str((i * 200) % max(1, len(trace.level_entries(None))))
        t = time.perf_counter()
        store.page(trace.id, None, top, 200)
        lat["page"].append(time.perf_counter() - t)
        if groups:  # a traced plain function (a lax.sin chain) has none
            t = time.perf_counter()
            store.page(trace.id, groups[i % len(groups)], None, 200)
            lat["group page"].append(time.perf_counter() - t)
        path, line = lines[i % len(lines)]
        trace.memo.clear()  # a new line each time, not the memo's answer
        t = time.perf_counter()
        found = trace.nodes_at(path, line)
        found[:50]  # what a hover reads in the loop before it sums a long line up off it
        lat["nodes at a line"].append(time.perf_counter() - t)
        t = time.perf_counter()
        trace.node(f"n{(i * 7919) % trace.node_count}")
        lat["node"].append(time.perf_counter() - t)
        time.sleep(0.02)
finally:  # the exporting thread stops whatever happened here, or the process never exits
    done.set()
    worker.join()
def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]
print(json.dumps({
    "rss_base_mb": round(base, 1), "rss_held_mb": round(held, 1), "keep_s": round(took, 2),
    "answers": {
        k: {"n": len(v), "p50_ms": round(statistics.median(v) * 1000, 2), "p99_ms": round(p99(v) * 1000, 2),
            "max_ms": round(max(v) * 1000, 2)}
        for k, v in lat.items() if v
    },
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small graphs, no bars (a smoke run)")
    parser.add_argument(
        "files", nargs="*", help="graph files (jaxlsp trace -o) to hold instead of the synthetic graphs; no bars"
    )
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        print("benchmarks/graph_store.py needs Linux (/proc)")
        return 1
    for name in args.files:
        held = subprocess.run([sys.executable, "-c", CHILD, name, str(ROOT), "10"], capture_output=True, text=True)
        print(f"{name}: {held.stdout.strip().splitlines()[-1] if held.returncode == 0 else held.stderr[-3000:]}")
    if args.files:
        return 0
    sizes = {"chain": [2_000], "transformer": [5_000]} if args.quick else SIZES
    missed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="jaxlsp-graph-store-") as tmp:
        for kind, counts in sizes.items():
            for n in counts:
                expanded, packed = make_text(kind, n)
                path = Path(tmp) / f"{kind}-{n}.json"
                path.write_text(packed, encoding="utf-8")
                figures: dict[str, Any] = {
                    "bytes_per_equation": {
                        "expanded": round(len(expanded.encode()) / n, 1),
                        "compact": round(len(packed.encode()) / n, 1),
                    }
                }
                del expanded, packed
                t0 = time.monotonic()
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(path), str(ROOT), "3" if args.quick else "10"],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    print(out.stderr[-3000:])
                    missed.append(f"{kind} {n}: the holding process failed")
                    continue
                figures.update(json.loads(out.stdout.strip().splitlines()[-1]))
                figures["seconds"] = round(time.monotonic() - t0, 1)
                print(f"{kind} {n:,} equations: {json.dumps(figures)}", flush=True)
                if args.quick:
                    continue
                if figures["bytes_per_equation"]["compact"] > BYTES_BAR:
                    missed.append(f"{kind} {n}: {figures['bytes_per_equation']['compact']} bytes an equation")
                if n >= 200_000 and figures["rss_held_mb"] > RSS_BAR_MB:
                    missed.append(f"{kind} {n}: RSS {figures['rss_held_mb']} MB > {RSS_BAR_MB:.0f} MB")
                worst = max(a["p99_ms"] for a in figures["answers"].values())
                if worst > P99_BAR_MS:
                    missed.append(f"{kind} {n}: an answer's p99 {worst} ms > {P99_BAR_MS:.0f} ms while exporting")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
