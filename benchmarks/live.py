"""Live shapes: save -> refreshed hover and diagnostics, idle CPU, and the jaxtyping check's cost.

One ``jaxlsp serve`` over pipes on a copy of benchmarks/models (trusted, liveShapes on by
default), measured in one run:

- save: the 12-layer d=256 Linen transformer (benchmarks/capture.py's target) is traced once
  explicitly with its ``forward`` profile (the pick a live trace then reuses; it also starts the
  warm spare), then each round edits transformer.py (a comment line), writes it, sends
  ``didChange`` + ``didSave`` and times until its ``jaxlsp/liveStatus`` says ``fresh`` with a new
  trace (the diagnostics are published before it) and a ``textDocument/hover`` on a traced line
  has answered. p50 and p95 over the rounds, and the ratio to the bare cold script of
  benchmarks/capture.py (a fresh ``python`` that imports jax and calls ``make_jaxpr``), run
  before each round so that the machine's slow spells hit both sides alike.
  Targets: p50 <= 0.5 s, p95 <= 1.5 s.
- idle: with nothing changing for ``--idle`` seconds (60 by default), the CPU time of the server
  and all its children (warm spare, fork server) over that time. Target: <= 1 % of a core.
- contracts: in this process, ``make_jaxpr`` of benchmarks/models/annotated.py (12 blocks, every
  function annotated with jaxtyping) with and without the check (worker/contracts.py), the
  minimum of several runs each, alternating. Target: <= 20 % added.

Exit status 1 when a target is missed. Linux only (/proc).
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
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))

from capture import CASES, bare_once  # noqa: E402
from server_memory import Peer  # noqa: E402

P50_TARGET = 0.5
P95_TARGET = 1.5
IDLE_TARGET = 0.01  # of one core
CONTRACTS_TARGET = 0.20
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and every live descendant (from /proc)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICKS
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total


def wait_fresh(peer: Peer, name: str, after: str | None, deadline: float = 300.0) -> str:
    """Read messages until ``name`` is fresh in a liveStatus with a trace other than ``after``."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        message = peer.receive()
        peer.answer(message)
        if message.get("method") != "jaxlsp/liveStatus":
            continue
        for target in message["params"]["targets"]:
            if target["name"] == name and target["state"] == "fresh" and target.get("traceId") not in (None, after):
                return str(target["traceId"])
            if target["name"] == name and target["state"] == "failed":
                raise SystemExit(f"the live trace of {name} failed: {target.get('reason')}")
    raise SystemExit(f"{name} did not become fresh")


def save_rounds(rounds: int) -> tuple[list[float], list[float], float]:
    """Save -> fresh hover latencies, the bare script's runs, and the server's idle CPU share."""
    case = next(c for c in CASES if c.profile == "forward")
    with tempfile.TemporaryDirectory(prefix="jaxlsp-live-bench-") as tmp:
        root = Path(tmp) / "models"
        shutil.copytree(BENCHMARKS / "models", root)
        file = root / "transformer.py"
        uri = file.as_uri()
        peer = Peer([sys.executable, "-m", "jaxlsp", "serve"], cwd=root)
        peer.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": "models"}],
                "capabilities": {"textDocument": {"hover": {}, "synchronization": {"didSave": True}}},
                "initializationOptions": {"jaxlsp": {"trusted": True}},
            },
        )
        peer.send({"method": "initialized", "params": {}})
        text = file.read_text()
        peer.send(
            {
                "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
            }
        )
        first = peer.request(
            "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "Transformer", "profile": "forward"}
        )
        last = str(first["traceId"])
        line = next(i for i, t in enumerate(text.splitlines()) if "nn.Dense" in t or ("@" in t and "=" in t))
        latencies: list[float] = []
        bare: list[float] = []
        for i in range(rounds):
            bare.append(bare_once(case)[0])
            text += f"# edit {i}\n"
            file.write_text(text)
            started = time.perf_counter()
            peer.send(
                {
                    "method": "textDocument/didChange",
                    "params": {"textDocument": {"uri": uri, "version": i + 2}, "contentChanges": [{"text": text}]},
                }
            )
            peer.send({"method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})
            last = wait_fresh(peer, "Transformer", last)
            shown = peer.request(
                "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line, "character": 8}}
            )
            latencies.append(time.perf_counter() - started)
            if not shown or "fresh" not in str(shown):
                raise SystemExit(f"hover after save {i} is not fresh: {shown}")
            time.sleep(1.0)  # the next save is not part of a burst
        return latencies, bare, peer.proc.pid  # type: ignore[return-value]


def idle_share(seconds: float) -> float:
    """Open the transformer, let its live trace finish, then measure CPU over ``seconds``."""
    with tempfile.TemporaryDirectory(prefix="jaxlsp-live-idle-") as tmp:
        root = Path(tmp) / "models"
        shutil.copytree(BENCHMARKS / "models", root)
        file = root / "annotated.py"
        peer = Peer([sys.executable, "-m", "jaxlsp", "serve"], cwd=root)
        peer.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": "models"}],
                "capabilities": {},
                "initializationOptions": {"jaxlsp": {"trusted": True}},
            },
        )
        peer.send({"method": "initialized", "params": {}})
        peer.send(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": file.as_uri(),
                        "languageId": "python",
                        "version": 1,
                        "text": file.read_text(),
                    }
                },
            }
        )
        peer.request("jaxlsp/trace", {"textDocument": {"uri": file.as_uri()}, "name": "model"})  # warm spare up
        time.sleep(5.0)  # let the live traces of the open file settle before the measured window
        before = cpu_seconds(peer.proc.pid)
        time.sleep(seconds)
        used = cpu_seconds(peer.proc.pid) - before
        peer.proc.kill()
        return used / seconds


def contracts_cost(repeat: int) -> tuple[float, float]:
    """make_jaxpr of the annotated model without and with the contract check (min of ``repeat``)."""
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(BENCHMARKS / "models"))
    import annotated

    from jaxlsp.capture.worker.contracts import Contracts
    from jaxlsp.capture.worker.failures import Workspace

    x = jnp.ones((8, 256))

    def fresh() -> Any:  # a new function each time: make_jaxpr caches by function
        return lambda x: annotated.model(x)

    jax.make_jaxpr(fresh())(x)
    plain: list[float] = []
    checked: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.make_jaxpr(fresh())(x)
        plain.append(time.perf_counter() - t0)
        with Contracts(Workspace(str(BENCHMARKS / "models"))) as check:
            t0 = time.perf_counter()
            jax.make_jaxpr(fresh())(x)
            checked.append(time.perf_counter() - t0)
        if check.violations:
            raise SystemExit(f"annotated.py broke a contract: {check.violations[0]['message']}")
    return min(plain), min(checked)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="saves timed")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU measured")
    parser.add_argument("--repeat", type=int, default=7, help="contract-check runs (minimum)")
    args = parser.parse_args()
    ok = True
    latencies, bare, _ = save_rounds(args.rounds)
    ordered = sorted(latencies)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    bare_wall = statistics.median(bare)
    ok = ok and p50 <= P50_TARGET and p95 <= P95_TARGET
    print("live shapes (seconds; ratios against the bare cold script in the same run)")
    print(
        f"  save -> fresh hover  transformer  p50 {p50:.2f} (target <= {P50_TARGET}) p95 {p95:.2f} "
        f"(target <= {P95_TARGET}) | bare {bare_wall:.2f} | p50/bare {p50 / bare_wall:.2f}x"
    )
    print(f"  runs: [{' '.join(f'{w:.2f}' for w in latencies)}]")
    share = idle_share(args.idle)
    ok = ok and share <= IDLE_TARGET
    print(f"  idle CPU (server + workers) over {args.idle:.0f} s: {100 * share:.2f} % of a core (target <= 1 %)")
    plain, checked = contracts_cost(args.repeat)
    added = checked / plain - 1
    ok = ok and added <= CONTRACTS_TARGET
    print(
        f"  jaxtyping contracts: make_jaxpr {plain:.3f} plain, {checked:.3f} checked: {100 * added:+.0f} % "
        f"(target <= {100 * CONTRACTS_TARGET:.0f} %)"
    )
    print("live ratios " + ("within target" if ok else "MISSED a target"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
