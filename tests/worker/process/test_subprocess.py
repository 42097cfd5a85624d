"""The worker as a real process: request on stdin, result on a private pipe, prints left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import scaled
from tests.worker.conftest import array, request

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[3]
ENTRY = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from jaxlsp.worker.process.main import main; main()"


def _run(req: dict[str, Any], timeout: float | None = None) -> tuple[dict[str, Any], str, str]:
    """The worker's entry point run on ``req``; ``timeout`` defaults to 60 s on the reference
    machine, scaled when the run starts."""
    timeout = scaled(60) if timeout is None else timeout
    read, write = os.pipe()
    try:
        req = {**req, "resultFd": write}
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", ENTRY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(write,),
            cwd=str(ROOT),
        )
        os.close(write)
        write = -1
        out, err = proc.communicate(json.dumps(req).encode(), timeout=timeout)
        with os.fdopen(read, "rb") as f:
            read = -1
            data = f.read()
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)
    assert proc.returncode == 0, err.decode()
    # The result pipe carries "#phase NAME" lines, then the JSON result.
    phases = []
    while data.startswith(b"#"):
        line, _, data = data.partition(b"\n")
        phases.append(line.decode())
    result = json.loads(data)
    if result.get("ok"):
        assert phases == ["#phase import", "#phase trace", "#phase build"]
    return result, out.decode(), err.decode()


def test_subprocess_capture_keeps_prints_out_of_the_result() -> None:
    result, out, _ = _run(request("noisy.py", "f", array(3)))
    assert result["ok"], result.get("error")
    assert [n["primitive"] for n in result["graph"]["nodes"]] == ["cos"]
    assert "noisy: imported" in out and "noisy: tracing" in out
    assert set(result["timings"]) >= {"import", "trace", "build", "serialize"}


def test_subprocess_unavailable_device_is_refused_before_import() -> None:
    result, out, _ = _run(request("noisy.py", "f", array(3), device="cuda:99"))  # refused with or without a GPU
    assert not result["ok"]
    assert result["error"]["kind"] == "refused"
    assert "cuda:99" in result["error"]["message"]
    assert "noisy: imported" not in out  # refused before the user's module ran


def test_subprocess_linen_model_with_x64() -> None:
    result, _, _ = _run(request("models_linen.py", "MLP", array(2, 5, dtype="float64"), x64=True))
    assert result["ok"], result.get("error")
    dtypes = {v["dtype"] for v in result["graph"]["values"]}
    assert "float64" in dtypes


BLOCKER = textwrap.dedent(
    """
    import importlib, sys
    sys.path.insert(0, ROOT)
    BLOCKED = {"pygls", "lsprotocol", "libcst", "jax", "jaxlib", "flax", "equinox", "numpy"}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError("blocked at module level: " + name)
            return None

    sys.meta_path.insert(0, Blocker())
    for name in MODULES:
        importlib.import_module(name)
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not leaked, leaked
    print("ok")
    """
)


def staged_modules() -> list[str]:
    """Every module of the folders staged into the user's interpreter (the manifest's)."""
    from jaxlsp.worker import STAGED_PACKAGES

    found = []
    for folder in STAGED_PACKAGES:
        for path in sorted((ROOT / "jaxlsp" / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_worker_modules_import_only_the_stdlib() -> None:
    modules = staged_modules()
    assert "jaxlsp.worker.process.forkserver" in modules and "jaxlsp.graph.io" in modules
    code = f"ROOT = {str(ROOT)!r}\nMODULES = {modules!r}\n" + BLOCKER
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=scaled(60))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
