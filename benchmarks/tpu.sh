#!/usr/bin/env bash
# The TPU checks (issue 47), on a machine with a TPU and JAX on its PYTHONPATH (a Cloud TPU VM
# image): jaxlsp env finds that JAX through the user's PYTHONPATH, traces run with --device tpu,
# --compiled lists the TPU's fusions, --time reads the profiler's TPU plane (and the CPU's, beside
# it), --values' replay check holds on both, and a TPU held by another program refuses the capture
# with that cause. Prints the figures for the notes. ONLY=time runs only the --time and --values steps,
# ONLY=topology only the v5e:1x1 topology compile against the chip's (issue 49).
#
# Run from the repository root. jaxlsp runs from the checkout (PYTHONPATH=$PWD); its own
# dependencies come from wheels in build/tpu-wheels (pip download --no-deps --only-binary=:all:
# --python-version 3.11 --platform manylinux_2_28_x86_64 -d build/tpu-wheels pygls lsprotocol
# cattrs attrs libcst tomlkit), installed into a folder under $TMPDIR that goes at the END of
# PYTHONPATH so the image's JAX stays first; flax comes from the machine's own index when it has
# one. The capture keeps jaxlsp's folder and the wheels' folder off its path (capture/userpath.py).
set -uo pipefail

PY="${PYTHON:-python3}"
TMP="${TMPDIR:-/tmp}"
DEPS="$TMP/jaxlsp-deps"
OUT="${OUT:-$TMP/jaxlsp-tpu}"
mkdir -p "$OUT"

if [ -d build/tpu-wheels ] && [ ! -d "$DEPS/pygls" ]; then
  "$PY" -m pip install -q --no-index --no-deps --target "$DEPS" build/tpu-wheels/*.whl
fi
if [ ! -d "$DEPS-flax/flax" ]; then
  "$PY" -m pip install -q --target "$DEPS-flax" flax >/dev/null 2>&1 \
    || "$PY" -m pip install -q --index-url file:///opt/pypi/simple --target "$DEPS-flax" flax >/dev/null 2>&1 \
    || echo "(flax not installed: no index)"
  rm -rf "$DEPS-flax"/jax "$DEPS-flax"/jaxlib "$DEPS-flax"/jax-* "$DEPS-flax"/jaxlib-* # the image's JAX only
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}:$DEPS:$DEPS-flax"
export XDG_CACHE_HOME="$OUT/cache"
J=("$PY" -m jaxlsp)

step() { echo; echo "== $*"; }
timed() { local t0 rc; t0=$(date +%s%N); "$@"; rc=$?; echo "(exit $rc, $((($(date +%s%N) - t0) / 1000000)) ms)" >&2; }

step "the machine"
"$PY" -c "import jax; print('jax', jax.__version__, jax.devices())"
ls -d /dev/accel* /dev/vfio/* 2>/dev/null | tr '\n' ' '; echo

# Issue 49: the compiled program for the TPU topology v5e:1x1 (libtpu's description, no chip asked
# for) beside the same program compiled on the real chip: fusions and per-chip memory must agree.
if [ "${ONLY:-}" = topology ] || [ -z "${ONLY:-}" ]; then
  POD="$OUT/pod"; mkdir -p "$POD"; cp examples/jax_mlp.py "$POD/"
  cat >"$POD/jaxlsp.toml" <<'TOML'
version = 1
[profiles.mlp]
target = "jax_mlp.py::mlp"
inputs.args = [
    [
        [{ kind = "array", shape = [784, 256] }, { kind = "array", shape = [256] }],
        [{ kind = "array", shape = [256, 128] }, { kind = "array", shape = [128] }],
        [{ kind = "array", shape = [128, 10] }, { kind = "array", shape = [10] }],
    ],
    { kind = "array", shape = [8, 784] },
]
[profiles.pod]
target = "jax_mlp.py::mlp"
topology = "v5e:1x1"
mesh = { axes = { data = 1 } }
inputs.args = [
    [
        [{ kind = "array", shape = [784, 256] }, { kind = "array", shape = [256] }],
        [{ kind = "array", shape = [256, 128] }, { kind = "array", shape = [128] }],
        [{ kind = "array", shape = [128, 10] }, { kind = "array", shape = [10] }],
    ],
    { kind = "array", shape = [8, 784] },
]
TOML
  step "mlp --compiled for the topology v5e:1x1, then on the chip"
  (cd "$POD" && timed "${J[@]}" trace jax_mlp.py::mlp --profile pod --python "$PY" --compiled --timeout 300 >"$POD/topology.txt" 2>&1
   timed "${J[@]}" trace jax_mlp.py::mlp --profile mlp --python "$PY" --device tpu --compiled --timeout 300 >"$POD/chip.txt" 2>&1
   for run in topology chip; do echo "-- $run"; grep -E "fused kernel|memory per device|peak per device \(compiled|costs per device|error|refused" "$POD/$run.txt"; done)
  [ "${ONLY:-}" = topology ] && exit 0
fi

if [ "${ONLY:-}" != time ]; then
step "jaxlsp env --python $PY --device tpu"
timed "${J[@]}" env --python "$PY" --device tpu

step "trace examples/jax_mlp.py::mlp --device tpu"
(cd examples && timed "${J[@]}" trace jax_mlp.py::mlp --python "$PY" --device tpu --timeout 300 >"$OUT/mlp.txt" 2>&1; head -8 "$OUT/mlp.txt")

step "trace examples/jax_mlp.py::mlp --device tpu --compiled"
(cd examples && timed "${J[@]}" trace jax_mlp.py::mlp --python "$PY" --device tpu --compiled --timeout 300 \
  -o "$OUT/mlp-compiled.json" >"$OUT/mlp-compiled.txt" 2>&1; head -40 "$OUT/mlp-compiled.txt")

step "trace the transformer (benchmarks/models, forward) --device tpu"
(cd benchmarks/models && timed "${J[@]}" trace transformer.py::Transformer --profile forward --python "$PY" \
  --device tpu --timeout 300 >"$OUT/transformer.txt" 2>&1; head -6 "$OUT/transformer.txt")

fi

# --time and --values on the transformer, on the TPU and on the CPU beside it; then the figures
# the acceptance asks for, read back from each graph: step, busy, share attributed, the rows'
# sum against the step, the first row.
for dev in tpu cpu; do
  step "trace the transformer --device $dev --time"
  (cd benchmarks/models && timed "${J[@]}" trace transformer.py::Transformer --profile forward --python "$PY" \
    --device "$dev" --time --timeout 300 -o "$OUT/transformer-time-$dev.json" >"$OUT/time-$dev.txt" 2>&1
   sed -n '/^time: step/,/^traced in/p' "$OUT/time-$dev.txt" | head -30)
done
step "the --time figures (tpu, cpu)"
"$PY" - "$OUT" <<'PYEOF'
import sys
from pathlib import Path
from jaxlsp.graph import io
from jaxlsp.graph.timing import duration, rows
for dev in ("tpu", "cpu"):
    path = Path(sys.argv[1]) / f"transformer-time-{dev}.json"
    if not path.exists():
        print(f"{dev}: no graph"); continue
    t = io.to_json(io.read(path))["time"]
    table = rows(t)
    top = f"{t['lines'][0]['path']}:{t['lines'][0]['line']}" if t["lines"] else "-"
    total = sum(r.seconds for r in table)
    print(f"{dev}: step {duration(t['step'])}, device busy {duration(t['busy'])} ({t['timeline']} timeline), "
          f"attributed {100 * t['attributed'] / t['busy']:.1f} % of busy; rows add up to "
          f"{100 * total / t['step']:.1f} % of the step; first row {table[0].label} {duration(table[0].seconds)}; "
          f"top line {top}")
PYEOF

for dev in tpu cpu; do
  step "trace the transformer --device $dev --values (the replay check)"
  (cd benchmarks/models && timed "${J[@]}" trace transformer.py::Transformer --profile forward --python "$PY" \
    --device "$dev" --values --timeout 300 >"$OUT/values-$dev.txt" 2>&1; grep -E "^(values|replay):" "$OUT/values-$dev.txt" || tail -3 "$OUT/values-$dev.txt")
done

[ "${ONLY:-}" = time ] && exit 0
step "a TPU held by another program: the capture is refused with that cause"
rm -f "$OUT/held"
"$PY" -c "import jax, sys, time; jax.devices(); open(sys.argv[1], 'w').close(); time.sleep(120)" "$OUT/held" &
holder=$!
for _ in $(seq 120); do [ -e "$OUT/held" ] && break; sleep 0.5; done
(cd examples && timed "${J[@]}" trace jax_mlp.py::mlp --python "$PY" --device tpu --timeout 120 >"$OUT/held.txt" 2>&1; tail -3 "$OUT/held.txt")
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
echo "done"
