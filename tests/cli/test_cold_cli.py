"""The cold ``jaxlsp trace``'s own costs: it starts its worker early (capture/launch/early.py), the capture
runs in it and a trace refused before its capture leaves no worker behind; it writes the graph
with the cyclic collector paused."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxlsp import cli
from jaxlsp.graph import io
from jaxlsp.graph.model import Graph
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


#: Says, as the user's module is imported, whether the worker's graph building was loaded already.
WITNESS = "import sys\n\nopen({out!r}, 'w').write(str('jaxlsp.worker.tracing.build' in sys.modules))\n"


def test_trace_captures_in_its_early_worker_and_a_refusal_leaves_none(tmp_path: Path) -> None:
    witness = tmp_path / "witness.txt"
    (tmp_path / "model.py").write_text(WITNESS.format(out=str(witness)) + MODEL)
    (tmp_path / "jaxlsp.toml").write_text(GOOD)
    cache = tmp_path / "cache"
    done = _trace(tmp_path, cache)
    assert done.returncode == 0, done.stderr
    line = re.search(r"traced in [\d.]+s \(cold; early ([\d.]+)s, jax ([\d.]+)s", done.stdout)
    assert line is not None, done.stdout  # jax came imported: the capture ran in the early worker
    assert float(line.group(1)) > 0 and (tmp_path / "g.json").is_file()
    assert witness.read_text() == "True"  # the capture's own modules were loaded before the request
    # Refused after the worker started (the recipe's input is wrong): it is killed, not left.
    (tmp_path / "jaxlsp.toml").write_text(BAD)
    refused = _trace(tmp_path, cache)
    assert refused.returncode == 2 and "profiles.f" in refused.stderr, refused.stderr
    assert _workers_of(cache) == []


def test_the_graph_is_written_with_the_collector_paused_and_never_formatted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Enough equations that the file's objects would start collections (a few thousand objects).
    (tmp_path / "model.py").write_text(
        MODEL + "\n\ndef g(x):\n    for _ in range(300):\n        x = f(x)\n    return x\n"
    )
    (tmp_path / "jaxlsp.toml").write_text(GOOD.replace("::f", "::g"))
    monkeypatch.chdir(tmp_path)
    writing = [False]
    during: list[int] = []  # generations collected while the file was made

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and writing[0]:
            during.append(int(info["generation"]))

    real = io.write_text  # what writes the file, whether the graph was decoded or not

    def write(*args: Any, **kwargs: Any) -> None:
        writing[0] = True
        try:
            gc.collect()  # what came before is not this one's to count
            during.clear()
            real(*args, **kwargs)
        finally:
            writing[0] = False

    monkeypatch.setattr(io, "write_text", write)
    formatted = [0]  # the graph's repr: a dataclass repr of every node (asyncio.run's end made one)
    plain_repr = Graph.__repr__

    def counted(self: Graph) -> str:
        formatted[0] += 1
        return plain_repr(self)

    monkeypatch.setattr(Graph, "__repr__", counted)
    gc.callbacks.append(watch)
    try:
        code = cli.main(["trace", "model.py::g", "--profile", "f", "-o", str(tmp_path / "g.json")])
    finally:
        gc.callbacks.remove(watch)
    assert code == 0 and len(io.read(tmp_path / "g.json").nodes) == 600
    assert during == []
    assert formatted == [0]
