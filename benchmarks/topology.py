"""``--compiled`` for a TPU pod from this CPU-only machine, against compiling by hand (issue 49).

Target: the 12-layer d=256 Flax Linen transformer (benchmarks/models/transformer.py) on
``v5e:16x16`` (256 chips), its batch of 256 sequences split over a 256-device mesh, parameters
replicated. Needs libtpu in build/libtpu (``make libtpu``): the capture interpreter is a venv
whose ``.pth`` adds .venv's packages and it, made by tests/podpython.py as the topology tests make it.

- bare compile: in that interpreter, after the abstract init and the trace, the time of
  ``jax.jit(f).lower(v, x).compile()`` for the topology alone;
- compiled view: the worker's ``compile`` phase of a ``--compiled`` capture with
  ``topology = "v5e:16x16"`` (lowering, compiling for the pod, reading the HLO back onto the
  graph, the fit).

Each figure is the median of its runs, alternated. Target: compiled view <= 1.2 x the bare
compile. Exit status 1 when missed.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from jaxlsp.capture.engine import TraceRequest
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.service import trace_once

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.podpython import pod_venv  # noqa: E402

TARGET = 1.2
RUNS = 3
LIBTPU = REPO / "build" / "libtpu"
TOPOLOGY = "v5e:16x16"

RECIPE = f"""version = 1

[profiles.pod]
target = "transformer.py::Transformer"
topology = "{TOPOLOGY}"
mesh = {{ axes = {{ data = 256 }}, types = "auto" }}
inputs.args = [{{ kind = "array", shape = [256, 128], dtype = "int32", sharding = ["data"] }}]
"""

BARE = """
import json, sys, time
import numpy as np
import jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
sys.path.insert(0, {folder!r})
import transformer as mod
devices = topologies.get_topology_desc(topology_name={topology!r}, platform="tpu").devices
mesh = Mesh(np.array(devices), ("data",))
m = mod.Transformer()
x = jax.ShapeDtypeStruct((256, 128), jnp.int32, sharding=NamedSharding(mesh, P("data")))
v = jax.eval_shape(lambda x: m.init(jax.random.key(0), x), jax.ShapeDtypeStruct((256, 128), jnp.int32))
v = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, P())), v)
f = lambda v, x: m.apply(v, x)
jax.make_jaxpr(f)(v, x)
t0 = time.perf_counter()
jax.jit(f).lower(v, x).compile()
print(json.dumps({{"compile": time.perf_counter() - t0}}))
"""


def bare(python: str, folder: Path) -> float:
    code = BARE.format(folder=str(folder), topology=TOPOLOGY)
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, timeout=600, env=env)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["compile"])


def viewed(python: str, folder: Path) -> tuple[float, dict[str, object]]:
    req = TraceRequest(
        file=folder / "transformer.py",
        name="Transformer",
        workspace_root=folder,
        profile="pod",
        python=python,
        compiled=True,
    )
    outcome = trace_once(req, CaptureOptions(timeout=600))
    section = outcome.graph.compiled or {}
    if section.get("error"):
        raise SystemExit(f"the compiled view failed: {section['error']}")
    return float(outcome.capture.result["timings"]["compile"]), section


def main() -> int:
    if not (LIBTPU / "libtpu").is_dir():
        print("benchmarks/topology.py: libtpu is not in build/libtpu (make libtpu)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="jaxlsp-topology-") as tmp:
        folder = Path(tmp)
        shutil.copy(REPO / "benchmarks" / "models" / "transformer.py", folder / "transformer.py")
        (folder / "jaxlsp.toml").write_text(RECIPE)
        python = pod_venv(folder)
        bares: list[float] = []
        views: list[float] = []
        section: dict[str, object] = {}
        for _ in range(RUNS):
            bares.append(bare(python, folder))
            seconds, section = viewed(python, folder)
            views.append(seconds)
    b, v = statistics.median(bares), statistics.median(views)
    collectives = section.get("collectives") or []
    fit = section.get("fit") or {}
    print(f"transformer (12 layers, d=256) on {TOPOLOGY} (256 chips), batch 256 over data=256:")
    print(
        f"  bare jax.jit(f).lower(...).compile(): {b:.2f}s (median of {RUNS}: {', '.join(f'{x:.2f}' for x in bares)})"
    )
    print(f"  compiled view (worker's compile phase): {v:.2f}s ({', '.join(f'{x:.2f}' for x in views)})")
    print(f"  {len(collectives) if isinstance(collectives, list) else 0} collectives; fit: {fit}")
    ratio = v / b if b else float("inf")
    ok = ratio <= TARGET
    print(f"  ratio {ratio:.2f} (target <= {TARGET}): {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
