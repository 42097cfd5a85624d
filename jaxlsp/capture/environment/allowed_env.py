"""The environment a process in the user's interpreter gets: an allow-list, never ours whole.

The server's environment may hold tokens and cloud credentials (``GITHUB_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, an editor's own secrets). Code in a trusted workspace runs with the
user's rights anyway, but it should see what a capture needs, not whatever the editor was started
with. So the probe, the warm spare and every worker start from :func:`base_environment`; a
profile's ``env = ["NAME", ...]`` adds named variables to one capture (sent in the request, set by
the worker before any user import); ``PYTHONPATH`` and the user site reach the interpreter's
``sys.path`` through :mod:`.userpath`, less anything a workspace controls; the worker points
``TMPDIR`` into its scratch folder, which is removed with it (docs/security.md).

``JAX_PLATFORMS`` is always ``cpu`` there: one process at a time can hold a TPU, and the user's
training run or notebook keeps it while they edit. A backend started before a capture configures
its device (a framework's import in the warm spare, a test that learning runs) gets the CPU, never
the chip; a capture whose profile asks for a TPU or a GPU sets ``jax_platforms`` itself before
any user import (worker/tracing/devices.py), which overrides the variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from jaxlsp.capture.environment import userpath

# Exact names, and prefixes (ending in "_") of families, that pass.
ALLOWED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM",
    "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TF_CPP_MIN_LOG_LEVEL",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
})  # fmt: skip
ALLOWED_PREFIXES = ("LC_", "JAX_", "XLA_", "CUDA_", "NVIDIA_", "TPU_", "JAXLSP_CAPTURE_")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Set in every process in the user's interpreter: no backend but the CPU's starts by accident.
CPU_ONLY = {"JAX_PLATFORMS": "cpu"}


def allowed(name: str) -> bool:
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES)


def base_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of ``environ`` (default: this process's environment), plus where the
    user's own Python finds packages (``PYTHONPATH``, the user site), in one variable that only
    :mod:`.userpath`'s bootstrap code reads (``PYTHONPATH`` itself stays unset: ``-I`` ignores it)."""
    source = os.environ if environ is None else environ
    return {**{k: v for k, v in source.items() if allowed(k)}, **userpath.environment(source), **CPU_ONLY}


def named(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a profile's ``env`` names, those that are set; the rest stay unset."""
    source = os.environ if environ is None else environ
    return {n: source[n] for n in names if _NAME.fullmatch(n) and n in source}
