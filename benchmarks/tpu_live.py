"""Live shapes beside a program that holds the TPU (issue 55.7), for benchmarks/tpu.sh.

Run while another process holds the chip (tpu.sh starts one): one ``jaxlsp serve`` over pipes on a
copy of benchmarks/models with a README that documents a script calling the transformer, trusted,
live shapes on. The transformer is traced once explicitly (on the profile's device: the CPU), then
its file is edited and saved and the live re-trace is awaited; then ``jaxlsp.learnShapes`` runs the
documented script. Each step prints its outcome and seconds; none may fail for want of the chip
(live traces, learning and the warm spare never open the TPU backend: JAX_PLATFORMS=cpu in every
process jaxlsp starts, capture/environment/allowed_env.py). Exit status 1 when a step failed.

``python3 benchmarks/tpu_live.py [--held FILE]``: with ``--held``, the file a holder wrote once
it held the chip must exist (the check that the chip really was held meanwhile).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))

from live import TRANSFORMER, Session  # noqa: E402

SCRIPT = '''"""Calls the transformer once (the README runs it): what jaxlsp learn learns from."""
import jax
import jax.numpy as jnp

from transformer import Transformer

if __name__ == "__main__":
    model = Transformer()
    tokens = jnp.zeros((2, 128), jnp.int32)
    params = model.init(jax.random.key(0), tokens)
    print(model.apply(params, tokens).shape)
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", help="a file the chip's holder wrote once it held the chip")
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory(prefix="jaxlsp-tpu-live-") as tmp:
        root = Path(tmp) / "ws"
        shutil.copytree(BENCHMARKS / "models", root / "models", ignore=shutil.ignore_patterns("__pycache__"))
        (root / "models" / "run_model.py").write_text(SCRIPT)
        (root / "models" / "README.md").write_text("Run the model once:\n\n```\npython run_model.py --batch 2\n```\n")
        path = root / TRANSFORMER.folder / TRANSFORMER.file
        key = f"{path.as_uri()}::{TRANSFORMER.name}"
        session = Session(root)
        try:
            session.open(path)
            started = time.perf_counter()
            first = session.request(
                "jaxlsp/trace",
                {"textDocument": {"uri": path.as_uri()}, "name": TRANSFORMER.name, "profile": TRANSFORMER.profile},
            )
            took = time.perf_counter() - started
            ok = "traceId" in first
            failed |= not ok
            print(f"explicit trace: {'ok' if ok else 'FAILED'} in {took:.2f} s {'' if ok else str(first)[:300]}")
            session.settle()
            state = session.states.get(key) or {}
            last = str(state.get("traceId") or first.get("traceId"))
            started = time.perf_counter()
            session.save(path, path.read_text() + "_jaxlsp_tpu_edit = 1\n")
            try:
                fresh = session.wait(key, "fresh", last, deadline=300.0)
                print(
                    f"live re-trace after a save: fresh in {time.perf_counter() - started:.2f} s ({fresh['traceId']})"
                )
            except SystemExit as exc:
                failed = True
                print(f"live re-trace after a save: FAILED: {exc}")
            live = [line for line in session.logs if line.startswith("live ")]
            print(f"server's live log: {live[-1] if live else '(none)'}")
            started = time.perf_counter()
            try:
                learned = session.request(
                    "workspace/executeCommand",
                    {"command": "jaxlsp.learnShapes", "arguments": [{"uri": root.as_uri(), "budget": 300}]},
                )
                print(f"learnShapes in {time.perf_counter() - started:.2f} s: {str(learned)[:600]}")
                failed |= not (isinstance(learned, dict) and learned.get("learned"))
            except SystemExit as exc:  # the session's answer to an error reply
                failed = True
                print(f"learnShapes: FAILED: {exc}")
        finally:
            session.peer.proc.kill()
    if args.held is not None:
        held = Path(args.held).exists()
        failed |= not held
        print(f"the chip was held meanwhile: {'yes' if held else 'NO (the holder never opened it)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
