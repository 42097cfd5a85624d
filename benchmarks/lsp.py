"""The server's own path: ``jaxlsp/trace`` and ``jaxlsp/graph`` over LSP, and the server's memory.

One ``jaxlsp serve`` over pipes (workspace benchmarks/models, trusted through
``initializationOptions``, no work-done progress), measured in one run:

- trace: ``jaxlsp/trace`` request -> response on a warm server (after a first forward trace, which
  starts the warm spare), median of several, for the profiles ``forward`` and ``grad`` of the
  12-layer d=256 Linen transformer; against the bare cold script of benchmarks/capture.py (a fresh
  ``python`` that imports jax and calls ``jax.make_jaxpr``), run before each trace so that the
  machine's slow spells hit both sides alike; each side is the median of its runs. Target: <= 0.5 x bare.
- graph: ``jaxlsp/graph`` page latency on the gradient trace: every page of the top level
  (limit 200) and the first page of each group below it, median and max.
- memory: the server's VmRSS idle (after initialize) and after 20 more traces, forward and grad
  alternating. The server keeps the 16 most recent traces (docs/lsp-extensions.md), so RSS must
  level off; the bar (MEMORY_LIMIT_MB) is what 16 transformer graphs imply with room to spare.

Exit status 1 when a target is missed. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))

from capture import CASES, Run, bare_once, median_run  # noqa: E402
from server_memory import Peer, status_mb  # noqa: E402

MODELS = BENCHMARKS / "models"
TARGET = "Transformer"
FILE = MODELS / "transformer.py"
WARM_TARGET = 0.5
MEMORY_LIMIT_MB = 1536.0  # 16 kept transformer traces (forward and grad) plus the idle server
MEMORY_TRACES = 20
GROUP_PAGES_MAX = 500


def trace(peer: Peer, profile: str) -> tuple[float, str]:
    params = {"textDocument": {"uri": FILE.as_uri()}, "name": TARGET, "profile": profile}
    wall, result = peer.timed("jaxlsp/trace", params)
    if not isinstance(result, dict) or "traceId" not in result:
        raise SystemExit(f"jaxlsp/trace {profile}: no trace: {result}")
    return wall, str(result["traceId"])


def graph_pages(peer: Peer, trace_id: str) -> tuple[list[float], int]:
    """Latencies (s) of every top-level page and the first page of each group below; and the group count."""
    latencies: list[float] = []
    queue: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"traceId": trace_id, "limit": 200}
        if cursor is not None:
            params["cursor"] = cursor
        wall, page = peer.timed("jaxlsp/graph", params)
        latencies.append(wall)
        queue += [item["id"] for item in page["items"] if item["kind"] == "group"]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    seen = 0
    while queue and seen < GROUP_PAGES_MAX:
        group = queue.pop(0)
        wall, page = peer.timed("jaxlsp/graph", {"traceId": trace_id, "group": group, "limit": 200})
        latencies.append(wall)
        seen += 1
        queue += [item["id"] for item in page["items"] if item["kind"] == "group"]
    return latencies, seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="warm traces (and bare runs) per profile (median)")
    args = parser.parse_args()
    cases = {case.profile: case for case in CASES if case.folder == MODELS}
    profiles = ["forward", "grad"]

    peer = Peer([sys.executable, "-m", "jaxlsp", "serve"], MODELS)
    try:
        caps = {"window": {"workDoneProgress": False}, "workspace": {"codeLens": {"refreshSupport": False}}}
        peer.request(
            "initialize",
            {
                "processId": None,
                "rootUri": MODELS.as_uri(),
                "capabilities": caps,
                "workspaceFolders": [{"uri": MODELS.as_uri(), "name": "models"}],
                "initializationOptions": {"jaxlsp": {"trusted": True, "liveShapes": False}},
            },
        )
        peer.send({"method": "initialized", "params": {}})
        peer.request("jaxlsp/discover", {"textDocument": {"uri": FILE.as_uri()}})  # the server has settled
        idle_rss = status_mb(peer.proc.pid, "VmRSS")

        first, _ = trace(peer, "forward")  # starts the warm spare
        warm: dict[str, list[float]] = {p: [] for p in profiles}
        bare_runs: dict[str, list[Run]] = {p: [] for p in profiles}
        grad_id = ""
        for _ in range(args.repeat):
            for profile in profiles:
                bare_runs[profile].append(bare_once(cases[profile]))
                wall, trace_id = trace(peer, profile)
                warm[profile].append(wall)
                if profile == "grad":
                    grad_id = trace_id

        latencies, groups = graph_pages(peer, grad_id)

        rss_after: list[float] = []
        for i in range(MEMORY_TRACES):
            trace(peer, profiles[i % 2])
            rss_after.append(status_mb(peer.proc.pid, "VmRSS"))
        hwm = status_mb(peer.proc.pid, "VmHWM")

        peer.request("shutdown", None)
        peer.send({"method": "exit", "params": None})
        peer.proc.wait(timeout=30)
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()

    ok = True
    print("LSP server path (seconds unless noted; ratios against the bare script in the same run)")
    print(f"  first jaxlsp/trace forward (starts the warm spare) {first:5.2f}")
    ratios = []
    for profile in profiles:
        bare_wall, inside = median_run(bare_runs[profile])
        median = statistics.median(warm[profile])
        ratio = median / bare_wall
        ratios.append(ratio)
        ok = ok and ratio <= WARM_TARGET
        runs = " ".join(f"{w:.2f}" for w in warm[profile])
        bares = " ".join(f"{w:.2f}" for w, _ in bare_runs[profile])
        print(
            f"  trace {profile:<8} {inside['eqns']:>5} eqns | bare median {bare_wall:5.2f} [{bares}] | warm "
            f"jaxlsp/trace median {median:5.2f} [{runs}] ({ratio:.2f}x, target <= {WARM_TARGET})"
        )
    ms = [w * 1000 for w in latencies]
    print(
        f"  jaxlsp/graph on the grad trace: {len(ms)} pages (top level + {groups} groups, limit 200) | "
        f"median {statistics.median(ms):.1f} ms | max {max(ms):.1f} ms"
    )
    rss = rss_after[-1]
    mem_ok = rss <= MEMORY_LIMIT_MB
    ok = ok and mem_ok
    print(
        f"  server RSS idle {idle_rss:.1f} MB | after {MEMORY_TRACES} more traces {rss:.1f} MB "
        f"(after 16: {rss_after[15]:.1f} MB, peak {hwm:.1f} MB; bar <= {MEMORY_LIMIT_MB:.0f} MB, 16 traces kept): "
        f"{'ok' if mem_ok else 'OVER'}"
    )
    print(
        f"lsp: trace forward {ratios[0]:.2f}x / grad {ratios[1]:.2f}x bare (<= {WARM_TARGET}), graph page median "
        f"{statistics.median(ms):.1f} ms max {max(ms):.1f} ms, RSS {idle_rss:.0f} -> {rss:.0f} MB "
        f"(<= {MEMORY_LIMIT_MB:.0f}): " + ("within target" if ok else "MISSED a target")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
