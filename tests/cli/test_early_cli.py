"""``jaxlsp trace`` starts its worker early (capture/early.py): the capture runs in it, and a trace
refused before its capture leaves no worker behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.deadlines import scaled

MODEL = "import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.sin(x) * 2\n"
GOOD = 'version = 1\n\n[profiles.f]\ntarget = "model.py::f"\ninputs.args = [{ kind = "array", shape = [3] }]\n'
BAD = 'version = 1\n\n[profiles.f]\ntarget = "model.py::f"\ninputs.args = [{ kind = "array", shape = [-3] }]\n'


def _trace(root: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxlsp", "trace", "model.py::f", "--profile", "f", "-o", str(root / "g.json")],
        cwd=root,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},  # a stage of its own, to find its workers by
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )


def _workers_of(cache: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(str(cache).encode() in arg for arg in argv):
                found.append(int(entry.name))
    return found


def test_trace_captures_in_its_early_worker_and_a_refusal_leaves_none(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "jaxlsp.toml").write_text(GOOD)
    cache = tmp_path / "cache"
    done = _trace(tmp_path, cache)
    assert done.returncode == 0, done.stderr
    line = re.search(r"traced in [\d.]+s \(cold; early ([\d.]+)s, jax ([\d.]+)s", done.stdout)
    assert line is not None, done.stdout  # jax came imported: the capture ran in the early worker
    assert float(line.group(1)) > 0 and (tmp_path / "g.json").is_file()
    # Refused after the worker started (the recipe's input is wrong): it is killed, not left.
    (tmp_path / "jaxlsp.toml").write_text(BAD)
    refused = _trace(tmp_path, cache)
    assert refused.returncode == 2 and "profiles.f" in refused.stderr, refused.stderr
    assert _workers_of(cache) == []
