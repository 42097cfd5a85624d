"""How much of an NNX or Equinox re-trace is the abstract init: the measurement behind the init
reuse that issue 29 asks for beyond Linen's structure hint (worker/loading/targets.py).

A warm re-trace of a Linen model skips its abstract init (the last capture's variables structure,
checked as the call reads it); an NNX or Equinox model is built again under ``nnx.eval_shape`` /
``eqx.filter_eval_shape`` on every capture. This script builds the decoders of
benchmarks/models/module_lms.py at two depths, in one fresh interpreter per (kind, depth), with
the worker's own settings (its relaxed collector thresholds and O(1) tracer probes,
worker/tracing/jaxcompat/), and prints per row the abstract init's and ``make_jaxpr``'s seconds,
init / trace, and the slope of each over the two depths (log time over log depth; 1.0 is linear).
It also runs the NNX init once without the tracer probes: NNX reads ``tracer.sharding`` on every
Variable it makes, and JAX builds that attribute's error message from the whole trace so far.

Then, through a real ``jaxlsp serve`` (``--no-server`` skips it), what the init reuse built since
saves (worker/reuse/initsnap.py): per row the bare script (a fresh interpreter's imports, abstract
init and ``make_jaxpr``), the server's live re-trace after a save of an edit inside the blocks'
``__call__`` (the last init kept) and after one inside their ``__init__`` (the init runs again),
each the median of three with its ``init`` phase, and the kept re-trace over the bare script. Live
re-traces: the user's own trace always runs the constructor (issue 45).

No goal is checked (exit status 0). ``--depths A,B`` (default 16,64).
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
import time
start = time.perf_counter()
import gc, json, sys
sys.path.insert(0, {models!r})
import jax, jax.numpy as jnp
import module_lms
gc.freeze()
gc.set_threshold(50_000, 50, 100)  # as the worker traces (worker/process/main.py)
if {probes!r}:
    from jaxlsp.worker.tracing import jaxcompat
    probes = jaxcompat.cheap_tracer_probes()  # held: a collected context manager undoes its patch
    probes.__enter__()
t0 = time.perf_counter()
model, call, x = module_lms.abstract({kind!r}, {depth!r})
t1 = time.perf_counter()
closed = jax.make_jaxpr(call)(model, x)
t2 = time.perf_counter()
print(json.dumps({{"init": t1 - t0, "trace": t2 - t1, "wall": t2 - start, "eqns": len(closed.jaxpr.eqns)}}), flush=True)
"""

RECIPE = """
[profiles.nnx_{depth}]
target = "module_lms.py::NNXLM"
init.kwargs = {{ depth = {depth} }}
inputs.args = [{{ kind = "array", shape = [2, 16], dtype = "int32", generator = {{ kind = "zeros" }} }}]

[profiles.equinox_{depth}]
target = "module_lms.py::EqxLM"
init.kwargs = {{ depth = {depth} }}
inputs.args = [{{ kind = "array", shape = [16], dtype = "int32", generator = {{ kind = "zeros" }} }}]
"""

#: where each kind's edit goes: a line of its block's ``__call__`` and of its ``__init__``
EDIT_AT = {
    "nnx": ("        y = self.attention_norm(x)\n", "        self.attention_norm = nnx.RMSNorm(DIM, rngs=rngs)\n"),
    "equinox": ("        y = jax.vmap(self.attention_norm)(x)\n", "        keys = jax.random.split(key, 7)\n"),
}


def measure(kind: str, depth: int, probes: bool = True) -> dict[str, float]:
    code = RUN.format(models=str(MODELS), kind=kind, depth=depth, probes=probes)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} depth {depth} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def slope(small: float, large: float, depths: tuple[int, int]) -> float:
    return math.log(large / small) / math.log(depths[1] / depths[0])


def served(folder: Path, kind: str, depth: int, repeats: int = 3) -> dict[str, float]:
    """A real server's live re-traces of one target after saves of an edit inside ``__call__``
    (``kept``: the last init's snapshot stands for the constructor) and inside ``__init__``
    (``rerun``: the constructor runs), medians of ``repeats``, each with its ``init`` phase. Live
    re-traces, because the user's own trace always runs the constructor (issue 45: an explicit
    trace never reuses an init), and it is the live path the snapshot serves."""
    import re
    import time

    sys.path.insert(0, str(BENCHMARKS))
    from scale import serving

    model = folder / "module_lms.py"
    name = "NNXLM" if kind == "nnx" else "EqxLM"
    out: dict[str, float] = {}
    with serving(folder) as peer:
        params = {"textDocument": {"uri": model.as_uri()}, "name": name, "profile": f"{kind}_{depth}"}
        peer.request("jaxlsp/discover", {"textDocument": {"uri": model.as_uri()}})
        out["first"], result = peer.timed("jaxlsp/trace", params)
        if not isinstance(result, dict) or "traceId" not in result:
            raise SystemExit(f"{kind} depth {depth}: no trace: {str(result)[:2000]}")
        last = str(result["traceId"])
        original = model.read_text(encoding="utf-8")

        def settled() -> None:
            """Wait (as a user reads the graph) for the snapshot the server makes in the background
            after a trace that ran the constructor: the note it logs (capture/service.py)."""
            deadline = time.monotonic() + 600
            while not any(line.startswith("init snapshot of") for line in peer.logs):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{kind} depth {depth}: no init snapshot came back")
                peer.request("jaxlsp/discover", {"textDocument": {"uri": model.as_uri()}})
                time.sleep(0.05)

        def live_save(text: str) -> tuple[float, float]:
            """Save ``text``: seconds to the status saying the target is fresh from a new trace,
            and that trace's init phase (its logged phase line)."""
            nonlocal last
            model.write_text(text, encoding="utf-8")
            start = time.perf_counter()
            peer.send({"method": "textDocument/didSave", "params": {"textDocument": {"uri": model.as_uri()}}})
            while True:
                message = peer.receive()
                peer.answer(message)
                if message.get("method") != "jaxlsp/liveStatus":
                    continue
                for target in message.get("params", {}).get("targets", []):
                    if target.get("name") != name:
                        continue
                    if target.get("state") == "failed":
                        raise SystemExit(f"{kind} depth {depth}: the live re-trace failed: {target}")
                    if target.get("state") == "fresh" and target.get("traceId") != last:
                        took = time.perf_counter() - start
                        last = str(target["traceId"])
                        deadline = time.monotonic() + 60  # its phase line follows the status
                        mine = f"live {name} fresh in "
                        while not any(line.startswith(mine) for line in peer.logs) and time.monotonic() < deadline:
                            peer.answer(peer.receive())
                        line = next((x for x in reversed(peer.logs) if x.startswith(mine)), "")
                        peer.logs.clear()
                        found = re.search(r" init ([0-9.]+)", line)
                        return took, float(found.group(1)) if found else float("nan")

        settled()
        peer.send(
            {"method": "workspace/didChangeConfiguration", "params": {"settings": {"jaxlsp": {"liveShapes": True}}}}
        )
        for label, line in zip(("kept", "rerun"), EDIT_AT[kind], strict=True):
            runs = []
            for i in range(1, repeats + 2):  # each text differs from the last; the first run is not counted
                time.sleep(1.0)  # a user's saves, not a burst (live/schedule.py waits out bursts)
                runs.append(live_save(original.replace(line, line + line.replace(line.strip(), "_ = DIM") * (i % 2))))
            kept = sorted(runs[1:])[(repeats - 1) // 2]
            out[label], out[f"{label} init"] = kept
        model.write_text(original, encoding="utf-8")
    return out


def server_rows(depths: tuple[int, int]) -> None:
    import shutil
    import tempfile

    print("through jaxlsp serve: warm re-traces after an edit inside __call__ (init kept) and inside __init__")
    print(f"  {'kind':<9}{'depth':>6}{'bare s':>8}{'kept s':>8}{'init':>7}{'rerun s':>9}{'init':>7}{'kept/bare':>10}")
    with tempfile.TemporaryDirectory(prefix="jaxlsp-init-share-") as tmp:
        folder = Path(tmp)
        shutil.copy(MODELS / "module_lms.py", folder / "module_lms.py")
        (folder / "jaxlsp.toml").write_text("version = 1\n" + "".join(RECIPE.format(depth=d) for d in depths))
        for kind in ("nnx", "equinox"):
            for depth in depths:
                bare = measure(kind, depth)
                row = served(folder, kind, depth)
                print(
                    f"  {kind:<9}{depth:>6}{bare['wall']:>8.2f}{row['kept']:>8.2f}{row['kept init']:>7.2f}"
                    f"{row['rerun']:>9.2f}{row['rerun init']:>7.2f}{row['kept'] / bare['wall']:>10.2f}",
                    flush=True,
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="16,64")
    parser.add_argument("--no-server", action="store_true", help="skip the server's re-traces")
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
    if not args.no_server:
        server_rows((a, b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
