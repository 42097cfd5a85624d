#!/usr/bin/env bash
# The TPU checks (issues 47, 49 and 55), on a machine with a TPU and JAX on its PYTHONPATH (a Cloud
# TPU VM image). Each step prints its own output; the last block prints each claim's figure:
#   55.1 the interpreter found with no --python: jaxlsp run from a tool-style venv with no JAX, in a
#        project with no .venv, picks the python3 on PATH and says where jax and flax come from;
#   55.2 --time on the chip: shares of device-busy time first, the step's beside them, idle a row;
#   55.3 one memory figure per chip, the capacity XLA allocates (fits / does not fit);
#   55.4 --values wall time on the TPU and on the CPU;
#   55.5 a chip another program holds: jaxlsp's cause first, never libtpu's lock-file advice;
#   55.6 live shapes, a save's re-trace and learning beside a program that holds the chip.
# ONLY=interpreter|time|memory|values|held|live|topology runs one group (time: --time and --values).
#
# Run from the repository root: `bash benchmarks/tpu.sh` (OUT=folder keeps the outputs; default
# $TMPDIR/jaxlsp-tpu). jaxlsp runs from the checkout (PYTHONPATH=$PWD: `python3 -m jaxlsp`), never
# installed; its own dependencies come from wheels in build/tpu-wheels (pip download --no-deps
# --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 -d build/tpu-wheels
# pygls lsprotocol cattrs attrs libcst tomlkit), installed into a folder under $TMPDIR that goes at
# the END of PYTHONPATH so the image's JAX stays first; flax comes from the machine's own index
# (file:///opt/pypi/simple) into a user site under $OUT, as `pip install --user flax` would put it.
# No network, no TCP socket, one program at a time on the chip (the steps run one after another).
set -uo pipefail

PY="${PYTHON:-python3}"
TMP="${TMPDIR:-/tmp}"
DEPS="$TMP/jaxlsp-deps"
OUT="${OUT:-$TMP/jaxlsp-tpu}"
ONLY="${ONLY:-}"
REPO="$PWD"
mkdir -p "$OUT"
IMAGE_PATH="${PYTHONPATH:-}"

step() { echo; echo "== $*"; }
# timed NAME CMD...: runs CMD, prints its exit status and wall time, and keeps the milliseconds in $OUT/NAME.ms
timed() {
  local name=$1 t0 rc ms; shift
  t0=$(date +%s%N); "$@"; rc=$?; ms=$((($(date +%s%N) - t0) / 1000000))
  echo "$ms" >"$OUT/$name.ms"; echo "(exit $rc, $ms ms)" >&2; return $rc
}
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }
holder_pid=""
start_holder() {  # a program that holds the chip until stop_holder (as a training run would)
  rm -f "$OUT/held"
  "$PY" -c "import jax, sys, time; jax.devices(); open(sys.argv[1], 'w').close(); time.sleep(900)" "$OUT/held" &
  holder_pid=$!
  for _ in $(seq 120); do [ -e "$OUT/held" ] && break; sleep 0.5; done
  [ -e "$OUT/held" ] && echo "(holder $holder_pid holds the chip)" || echo "(the holder did not open the chip)"
}
stop_holder() { [ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null; wait "$holder_pid" 2>/dev/null; holder_pid=""; }
trap stop_holder EXIT

if [ -d build/tpu-wheels ] && [ ! -d "$DEPS/pygls" ]; then
  "$PY" -m pip install -q --no-index --no-deps --target "$DEPS" build/tpu-wheels/*.whl
fi
# Flax in a user site of this run's own (PYTHONUSERBASE), from the machine's index; the image's JAX
# stays the only one (jax and jaxlib are removed from it).
USERBASE="$OUT/userbase"
USERSITE=$(PYTHONUSERBASE="$USERBASE" "$PY" -c "import site; print(site.getusersitepackages())")
if [ ! -d "$USERSITE/flax" ]; then
  PYTHONUSERBASE="$USERBASE" "$PY" -m pip install -q --user flax >/dev/null 2>&1 \
    || PYTHONUSERBASE="$USERBASE" "$PY" -m pip install -q --user --index-url file:///opt/pypi/simple flax >/dev/null 2>&1 \
    || echo "(flax not installed: no index)"
  rm -rf "$USERSITE"/jax "$USERSITE"/jaxlib "$USERSITE"/jax-* "$USERSITE"/jaxlib-*
fi
export PYTHONUSERBASE="$USERBASE"
export PYTHONPATH="$REPO${IMAGE_PATH:+:$IMAGE_PATH}:$DEPS"
export XDG_CACHE_HOME="$OUT/cache"
J=("$PY" -m jaxlsp)

step "the machine"
"$PY" -c "import jax; print('jax', jax.__version__, jax.devices())"
"$PY" -c "import flax; print('flax', flax.__version__, flax.__file__)" 2>&1 | tail -1
ls -d /dev/accel* /dev/vfio/* 2>/dev/null | tr '\n' ' '; echo

# 55.1: a tool-style install (a venv of its own without JAX; jaxlsp from the checkout on its
# PYTHONPATH) run with no --python in a project with no .venv: the python3 on PATH has JAX (the
# image's PYTHONPATH) and flax (the user site), and is chosen, said, and traces a Linen model.
if want interpreter; then
  TOOL="$OUT/tool"; PROJ="$OUT/project"
  rm -rf "$TOOL" "$PROJ"; "$PY" -m venv --without-pip "$TOOL"; cp -r tests/workspaces/environments "$PROJ"
  step "55.1 jaxlsp env --kind linen, no --python, from a tool venv ($TOOL/bin/python) in $PROJ"
  (cd "$PROJ" && timed env "$TOOL/bin/python" -m jaxlsp env --kind linen >"$OUT/interpreter-env.txt" 2>&1; cat "$OUT/interpreter-env.txt")
  step "55.1 jaxlsp trace linen_model.py::Tiny, no --python"
  (cd "$PROJ" && timed trace "$TOOL/bin/python" -m jaxlsp trace linen_model.py::Tiny --timeout 300 >"$OUT/interpreter-trace.txt" 2>&1
   head -3 "$OUT/interpreter-trace.txt"; grep -E "^traced in|refused" "$OUT/interpreter-trace.txt")
fi

# Issue 49: the compiled program for the TPU topology v5e:1x1 (libtpu's description, no chip asked
# for) beside the same program compiled on the real chip: fusions and per-chip memory must agree;
# 55.3: one memory figure per chip, and the capacity both name.
if want topology || want memory; then
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
  (cd "$POD" && timed compile-topology "${J[@]}" trace jax_mlp.py::mlp --profile pod --python "$PY" --compiled --timeout 300 >"$POD/topology.txt" 2>&1
   timed compile-chip "${J[@]}" trace jax_mlp.py::mlp --profile mlp --python "$PY" --device tpu --compiled --timeout 300 >"$POD/chip.txt" 2>&1
   for run in topology chip; do
     echo "-- $run"
     grep -E "fused kernel|fits a chip|does not fit|memory per|held at the compiled|schedule's walk|costs per device|error|refused" "$POD/$run.txt"
   done)
  [ "$ONLY" = topology ] && exit 0
fi

if [ -z "$ONLY" ]; then
  step "jaxlsp env --python $PY --device tpu"
  timed env-tpu "${J[@]}" env --python "$PY" --device tpu

  step "trace examples/jax_mlp.py::mlp --device tpu"
  (cd examples && timed mlp "${J[@]}" trace jax_mlp.py::mlp --python "$PY" --device tpu --timeout 300 >"$OUT/mlp.txt" 2>&1; head -8 "$OUT/mlp.txt")

  step "trace examples/jax_mlp.py::mlp --device tpu --compiled"
  (cd examples && timed mlp-compiled "${J[@]}" trace jax_mlp.py::mlp --python "$PY" --device tpu --compiled --timeout 300 \
    -o "$OUT/mlp-compiled.json" >"$OUT/mlp-compiled.txt" 2>&1; head -40 "$OUT/mlp-compiled.txt")

  step "trace the transformer (benchmarks/models, forward) --device tpu"
  (cd benchmarks/models && timed transformer "${J[@]}" trace transformer.py::Transformer --profile forward --python "$PY" \
    --device tpu --timeout 300 >"$OUT/transformer.txt" 2>&1; head -6 "$OUT/transformer.txt")
fi

# 55.2: --time on the TPU and on the CPU beside it (the CPU keeps shares of the step); then the
# figures read back from each graph: step, busy, share attributed, the rows' sum, the first row.
if want time; then
  for dev in tpu cpu; do
    step "trace the transformer --device $dev --time"
    (cd benchmarks/models && timed "time-$dev" "${J[@]}" trace transformer.py::Transformer --profile forward --python "$PY" \
      --device "$dev" --time --timeout 300 -o "$OUT/transformer-time-$dev.json" >"$OUT/time-$dev.txt" 2>&1
     sed -n '/^time: step/,/^traced in/p' "$OUT/time-$dev.txt" | head -40)
  done
  step "the --time figures (tpu, cpu)"
  "$PY" - "$OUT" <<'PYEOF'
import sys
from pathlib import Path
from jaxlsp.graph import io
from jaxlsp.graph.timing import device_view, duration, rows
for dev in ("tpu", "cpu"):
    path = Path(sys.argv[1]) / f"transformer-time-{dev}.json"
    if not path.exists():
        print(f"{dev}: no graph"); continue
    t = io.to_json(io.read(path))["time"]
    table = rows(t)
    top = t["lines"][0] if t["lines"] else None
    total = sum(r.seconds for r in table)
    first = table[0]
    print(f"{dev}: step {duration(t['step'])}, device busy {duration(t['busy'])} ({t['timeline']} timeline), "
          f"attributed {100 * t['attributed'] / t['busy']:.1f} % of busy; rows add up to "
          f"{100 * total / t['step']:.1f} % of the step; shares of {'busy, then step' if device_view(t) else 'the step'}; "
          f"first row {first.label} {duration(first.seconds)} = {100 * first.seconds / t['busy']:.0f} % of busy, "
          f"{100 * first.seconds / t['step']:.0f} % of the step; top line "
          + (f"{top['path']}:{top['line']} {duration(top['seconds'])}" if top else "-"))
PYEOF
fi

# 55.4: --values on the transformer, on the TPU and on the CPU: the replay check and the wall time.
if want time || want values; then
  for dev in tpu cpu; do
    step "trace the transformer --device $dev --values (the replay check)"
    (cd benchmarks/models && timed "values-$dev" "${J[@]}" trace transformer.py::Transformer --profile forward --python "$PY" \
      --device "$dev" --values --timeout 600 >"$OUT/values-$dev.txt" 2>&1
     grep -E "^(values|replay):|^traced in" "$OUT/values-$dev.txt" || tail -3 "$OUT/values-$dev.txt")
  done
  [ "$ONLY" = time ] && exit 0
fi

# 55.5: a chip another program holds: the capture is refused with jaxlsp's cause first.
if want held; then
  step "55.5 a TPU held by another program: the capture is refused with that cause"
  start_holder
  (cd examples && timed held "${J[@]}" trace jax_mlp.py::mlp --python "$PY" --device tpu --timeout 120 >"$OUT/held.txt" 2>&1
   head -3 "$OUT/held.txt")
  stop_holder
fi

# 55.6: beside a program that holds the chip, the CPU traces (the default device), jaxlsp learn,
# and a live session (an explicit trace, a save's live re-trace, learnShapes) all work.
if want live; then
  step "55.6 beside a program that holds the chip: a CPU trace, jaxlsp learn, live shapes"
  start_holder
  (cd benchmarks/models && timed live-cpu-trace "${J[@]}" trace transformer.py::Transformer --profile forward --python "$PY" \
    --timeout 300 >"$OUT/live-cpu-trace.txt" 2>&1; grep -E "^traced in|refused|error" "$OUT/live-cpu-trace.txt" | head -3)
  LEARN="$OUT/learn"; rm -rf "$LEARN"; cp -r benchmarks/models "$LEARN"
  printf 'import jax, jax.numpy as jnp\nfrom transformer import Transformer\nif __name__ == "__main__":\n    m = Transformer()\n    t = jnp.zeros((2, 128), jnp.int32)\n    print(m.apply(m.init(jax.random.key(0), t), t).shape)\n' >"$LEARN/run_model.py"
  printf 'Run it once:\n\n```\npython run_model.py --batch 2\n```\n' >"$LEARN/README.md"
  (cd "$LEARN" && timed live-learn "${J[@]}" learn --python "$PY" >"$OUT/live-learn.txt" 2>&1; tail -4 "$OUT/live-learn.txt")
  timed live-session "$PY" benchmarks/tpu_live.py --held "$OUT/held" >"$OUT/live-session.txt" 2>&1
  cut -c1-400 "$OUT/live-session.txt"
  stop_holder
fi

step "the claims (issue 55)"
ms() { cat "$OUT/$1.ms" 2>/dev/null || echo "-"; }
if [ -f "$OUT/interpreter-env.txt" ]; then
  echo "55.1 interpreter: $(head -1 "$OUT/interpreter-env.txt" | cut -c1-200)"
  echo "     $(grep -E '^why this interpreter' "$OUT/interpreter-env.txt" | cut -c1-200)"
  echo "     $(grep -E '^where:' "$OUT/interpreter-env.txt")"
  echo "     trace: $(grep -E '^traced in|refused' "$OUT/interpreter-trace.txt" | head -1)"
fi
if [ -f "$OUT/time-tpu.txt" ]; then
  echo "55.2 shares (tpu): $(grep -E '^module ' "$OUT/time-tpu.txt" | head -1)"
  grep -A2 -E '^module ' "$OUT/time-tpu.txt" | tail -2 | sed 's/^/     /'
  echo "     $(grep -E '^\(idle' "$OUT/time-tpu.txt" | head -1)"
fi
if [ -f "$OUT/pod/chip.txt" ]; then
  echo "55.3 memory (chip): $(grep -E '^memory per' "$OUT/pod/chip.txt" | head -1)"
  echo "     $(grep -E "fits a chip|does not fit" "$OUT/pod/chip.txt" | head -1)"
  echo "     $(grep -E "schedule's walk" "$OUT/pod/chip.txt" | head -1)"
  echo "     topology: $(grep -E "fits a chip|does not fit" "$OUT/pod/topology.txt" | head -1)"
fi
if [ -f "$OUT/values-tpu.ms" ]; then
  echo "55.4 values wall time: tpu $(ms values-tpu) ms, cpu $(ms values-cpu) ms" \
    "(ratio $(awk "BEGIN { c = $(ms values-cpu); if (c > 0) printf \"%.1f\", $(ms values-tpu) / c }"))"
fi
if [ -f "$OUT/held.txt" ]; then
  echo "55.5 held chip: $(head -1 "$OUT/held.txt" | cut -c1-220)"
  if grep -q "sudo rm" "$OUT/held.txt"; then
    grep -n "sudo rm" "$OUT/held.txt" | head -2 | cut -c1-200 | sed 's/^/     libtpu'"'"'s lock-file advice appears at line /'
  else
    echo "     libtpu's lock-file advice: not shown"
  fi
fi
if [ -f "$OUT/live-session.txt" ]; then
  echo "55.6 live beside a holder: cpu trace $(grep -cE '^traced in' "$OUT/live-cpu-trace.txt") ok in $(ms live-cpu-trace) ms;" \
    "learn: $(grep -E '^learned' "$OUT/live-learn.txt" | head -1)"
  grep -E "^(explicit trace|live re-trace|learnShapes|the chip was held)" "$OUT/live-session.txt" | cut -c1-200 | sed 's/^/     /'
fi
echo "done (outputs in $OUT)"
