"""A capture interpreter that can compile for a TPU pod from this CPU-only machine (issue 49): a
venv of the test's own whose ``.pth`` adds .venv's packages and build/libtpu (``make libtpu`` puts
there the libtpu wheel jax[tpu] brings). .venv itself has no libtpu: a libtpu beside jax makes every
process that opens a backend probe for a chip. Used by tests/cli/test_topology.py,
tests/server/test_topology.py and benchmarks/topology.py; without build/libtpu a test is skipped,
saying how to get it."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBTPU = REPO / "build" / "libtpu"


def pod_python(folder: Path) -> str:
    """:func:`pod_venv`, or the test skipped when build/libtpu has no libtpu."""
    if not (LIBTPU / "libtpu").is_dir():
        pytest.skip("libtpu is not in build/libtpu: run `make libtpu` (make test does)")
    return pod_venv(folder)


def pod_venv(folder: Path) -> str:
    """The interpreter of a new venv in ``folder`` that sees .venv's packages and libtpu."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "jaxlsp-pod.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{LIBTPU}\n")
    return str(python)
