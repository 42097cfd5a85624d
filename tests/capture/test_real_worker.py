"""End to end with the real worker: the same tiny target, cold and through a spare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxlsp.capture.launch.client import run_capture
from jaxlsp.capture.launch.spare import SparePool
from tests.worker.conftest import request

MODEL = """\
import jax.numpy as jnp


def f(x):
    return jnp.sin(x) * 2
"""


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


DEVICES = """\
import jax


def count(x):
    return x * jax.device_count()
"""


async def test_one_spare_serves_every_device_count(tmp_path: Path, jax_python: str) -> None:
    """The device count is fixed when an XLA backend starts; the spare never starts one, and each
    forked capture starts its own with the count its profile asks for (devices = N): one warm spare
    serves 2, then 4, then 1 device, and a cold worker does too."""
    (tmp_path / "parallel.py").write_text(DEVICES)
    ones = {"kind": "array", "shape": [3], "dtype": "float32", "generator": {"kind": "ones"}}

    def scale(devices: int | None) -> dict[str, Any]:
        extra = {"devices": devices} if devices is not None else {}
        return request("parallel.py", "count", ones, workspace=tmp_path, kind="function", **extra)

    pool = SparePool()
    seen: list[tuple[str, Any]] = []
    try:
        assert await pool.start(jax_python)
        for devices in (2, 4, None):
            outcome = await pool.capture(scale(devices), python=jax_python)
            assert outcome.ok and outcome.via == "spare", (outcome.result, outcome.stderr[-2000:])
            (mul,) = outcome.result["graph"]["nodes"]
            literal = next(v for v in outcome.result["graph"]["values"] if v["id"] == mul["inputs"][1])
            seen.append((outcome.via, literal["literal"]))
    finally:
        await pool.close()
    cold = await run_capture(scale(3), python=jax_python)
    assert cold.ok, cold.result
    (mul,) = cold.result["graph"]["nodes"]
    seen.append(("cold", next(v for v in cold.result["graph"]["values"] if v["id"] == mul["inputs"][1])["literal"]))
    assert seen == [("spare", 2), ("spare", 4), ("spare", 1), ("cold", 3)]


async def test_the_spare_fills_jax_caches_the_captures_missed(tmp_path: Path, jax_python: str) -> None:
    """A capture through the spare reports the calls of jax.numpy's jitted functions that missed
    JAX's caches (worker/reuse/priming.py); the spare makes them; the next capture's graph is the same."""
    import asyncio

    from tests.deadlines import scaled

    request = _request(tmp_path)
    pool = SparePool()
    try:
        assert await pool.start(jax_python)
        first = await pool.capture(request, python=jax_python)
        assert first.ok and first.via == "spare", (first.result, first.stderr[-2000:])
        assert "primes" not in first.result  # the pool's to act on, not the caller's
        deadline = asyncio.get_running_loop().time() + scaled(60)
        while pool.primed(jax_python) < 2:  # jnp.sin and the multiplication
            assert asyncio.get_running_loop().time() < deadline, "the spare primed nothing"
            await asyncio.sleep(0.02)
        second = await pool.capture(request, python=jax_python)
    finally:
        await pool.close()
    assert second.ok, second.result
    assert second.result["graph"]["nodes"] == first.result["graph"]["nodes"]
    assert second.result["graph"]["values"] == first.result["graph"]["values"]
