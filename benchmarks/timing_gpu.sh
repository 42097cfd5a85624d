#!/usr/bin/env bash
# The measured-time check on a GPU (issue 28): `jaxlsp trace --time --device cuda:0` on the 12-layer
# transformer, then benchmarks/timing.py against a bare compile-and-run on the same GPU.
#
# Run from the repository root on a machine with an NVIDIA GPU, in an environment where jax has its
# CUDA plugin (`pip install -c constraints.txt "jax[cuda12]"` into .venv, or PYTHON=... of one that
# has it). Prints the CLI's summary (the step, the module table, what was not attributed), the
# graph's time section in brief (which timeline the events were read from: "device" is the GPU's
# own), and the benchmark's verdict; exit status 1 when a step fails. About 2 minutes.
set -euo pipefail

PYTHON="${PYTHON:-.venv/bin/python}"
OUT="${OUT:-build/timing-gpu}"
mkdir -p "$OUT"

"$PYTHON" -c "import jax; print('jax', jax.__version__, jax.devices())"
"$PYTHON" -c "import jax, sys; sys.exit(0 if jax.devices('cuda') else 1)" || {
  echo "no CUDA device visible to jax: install its CUDA plugin first" >&2
  exit 1
}

echo "== jaxlsp trace --time --device cuda:0 (transformer, forward)"
(cd benchmarks/models && "../../$PYTHON" -m jaxlsp trace transformer.py::Transformer --profile forward \
  --device cuda:0 --time --repeat 10 --timeout 600 -o "../../$OUT/transformer-time.json") | tee "$OUT/trace.txt"

echo "== the time section"
"$PYTHON" - "$OUT/transformer-time.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["time"]
print(f"device {t['device']}, timeline {t['timeline']}, step {t['step'] * 1e3:.2f} ms, busy {t['busy'] * 1e3:.2f} ms, "
      f"attributed {100 * t['attributed'] / max(t['busy'], 1e-12):.1f} %, phases {t['phases']}")
print("top ops:", ", ".join(f"{o['name']} ({o['opcode']}) {o['seconds'] * 1e6:.0f} us" for o in t["ops"][:8]))
missing = [o for o in t["ops"] if not o["nodes"]]
print(f"not attributed: {len(missing)} ops, {sum(o['seconds'] for o in missing) * 1e3:.3f} ms per step")
print("notes:", *t["notes"], sep="\n  ")
if t["timeline"] != "device":
    sys.exit("the GPU's own timeline had no op events: the figures came from the host's launches")
EOF

echo "== benchmarks/timing.py --device cuda:0"
"$PYTHON" benchmarks/timing.py --device cuda:0 --runs 3 --repeat 10 | tee "$OUT/benchmark.txt"
