"""End to end with the real worker (when present): the same tiny target, cold and through a spare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import jaxlsp
from jaxlsp.capture.client import run_capture
from jaxlsp.capture.spare import SparePool
from tests.capture.worker.conftest import request

MODEL = """\
import jax.numpy as jnp


def f(x):
    return jnp.sin(x) * 2
"""

pytestmark = pytest.mark.skipif(
    not (Path(jaxlsp.__file__).parent / "capture" / "worker" / "main.py").exists(), reason="no worker yet"
)


def _request(root: Path) -> dict[str, Any]:
    (root / "model.py").write_text(MODEL)
    zeros = {"kind": "array", "shape": [3], "dtype": "float32", "generator": {"kind": "zeros"}}
    return request("model.py", "f", zeros, workspace=root, kind="function")


async def test_real_worker_cold_and_warm(tmp_path: Path, jax_python: str) -> None:
    request = _request(tmp_path)
    cold = await run_capture(request, python=jax_python)
    assert cold.ok, cold.result
    assert cold.result["graph"]["format"] == "jaxlsp.graph"
    pool = SparePool()
    try:
        assert await pool.start(jax_python)
        warm = await pool.capture(request, python=jax_python)
    finally:
        await pool.close()
    assert warm.ok and warm.via == "spare", (warm.result, warm.stderr[-2000:])
    primitives = sorted(n["primitive"] for n in warm.result["graph"]["nodes"])
    assert primitives == sorted(n["primitive"] for n in cold.result["graph"]["nodes"])
