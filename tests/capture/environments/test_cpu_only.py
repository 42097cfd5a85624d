"""Issue 55.6: nothing jaxlsp starts in the user's interpreter opens a TPU by accident. A backend
that starts before a capture configures its device (a framework's import in the warm spare, the
tests learning runs) gets the CPU, whatever ``JAX_PLATFORMS`` the user's shell exports; a capture
whose profile asks for a TPU still asks libtpu for it (here, with no TPU: refused, never the CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jaxlsp.capture.environment import allowed_env
from jaxlsp.capture.inputs import learning
from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[3]


def _run(code: str, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``code`` in the suite's interpreter as jaxlsp starts one (``-I``, the allow-listed environment)."""
    return subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n{code}"],
        env=allowed_env.base_environment(environ),
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )


def test_every_process_jaxlsp_starts_gets_the_cpu_even_when_the_shell_asks_for_a_tpu() -> None:
    pytest.importorskip("jax")
    user = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "JAX_PLATFORMS": "tpu"}
    assert allowed_env.base_environment(user)["JAX_PLATFORMS"] == "cpu"
    # A backend started by accident (a module that makes an array at import) is the CPU's.
    done = _run("import jax, jax.numpy as jnp; jnp.ones(3); print(jax.default_backend())", user)
    assert done.returncode == 0 and done.stdout.strip() == "cpu", done.stderr[-2000:]


def test_a_capture_that_asks_for_a_tpu_still_asks_libtpu_for_it() -> None:
    pytest.importorskip("jax")
    done = _run(
        "from jaxlsp.worker.tracing.devices import configure_jax\n"
        "from jaxlsp.worker.core.failures import CaptureError\n"
        "try:\n    configure_jax('tpu', False, True)\n"
        "except CaptureError as exc:\n    print('refused:', exc)\n"
        "else:\n    print('opened')",
        {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused:") and "device tpu" in done.stdout, done.stdout  # never the CPU


def test_learning_runs_the_workspaces_examples_on_the_cpu() -> None:
    example = {"kind": "test", "path": "/p/tests/test_m.py", "text": "tests/test_m.py"}
    request = learning.request_for(example, Path("/p"), 5.0, 10.0)  # type: ignore[arg-type]
    assert request["profile"]["device"] == "cpu"
