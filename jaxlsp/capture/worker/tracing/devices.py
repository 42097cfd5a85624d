"""JAX's configuration before any user import: x64, the platform, the device to trace under and
the number of virtual CPU devices; an unavailable device is refused.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from jaxlsp.capture.worker.core.failures import CaptureError


def configure_jax(device: str, x64: bool, jax_ready: bool, devices: int | None = None) -> Any:
    """Set x64, the platform and the number of CPU devices before any user import; an
    unavailable device is ``refused``.

    ``devices``: N virtual CPU devices (``--xla_force_host_platform_device_count``), which only
    take effect before the XLA backend starts. A forked capture of the warm spare starts its own
    backend (the spare never does), so every capture gets the count it asks for; a process whose
    backend already runs with another count refuses rather than trace with the wrong one.
    Returns the device to trace under (None for the CPU: tracing needs no backend at all).
    """
    from jaxlsp.capture.worker.tracing import jaxcompat

    if device != "cpu" and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise CaptureError("refused", f"unknown device {device!r}: expected 'cpu' or 'cuda:N'")
    if devices is not None and device != "cpu":
        raise CaptureError(
            "refused", f"devices = {devices} makes virtual CPU devices; the profile's device is {device}"
        )
    try:
        import jax
    except ImportError as exc:
        raise CaptureError("refused", f"jax is not installed in this interpreter: {exc}") from None
    config: Any = jax.config
    config.update("jax_enable_x64", bool(x64))
    initialised = jaxcompat.backends_initialized()
    if devices is not None:
        _cpu_devices(config, devices, initialised)
    if device == "cpu":
        if not initialised:
            config.update("jax_platforms", "cpu")
        return None
    index = int(device[5:])
    if not initialised:
        config.update("jax_platforms", "cuda")
    try:
        found = jax.devices("cuda")
    except Exception as exc:
        raise CaptureError("refused", f"device {device} is unavailable: {type(exc).__name__}: {exc}") from None
    if index >= len(found):
        raise CaptureError("refused", f"device {device} is unavailable: only {len(found)} CUDA device(s) found")
    return found[index]


DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def _cpu_devices(config: Any, devices: int, initialised: bool) -> None:
    """Ask XLA for ``devices`` CPU devices (before its backend starts), or check the running one."""
    if initialised:
        import jax

        have = jax.device_count("cpu")
        if have != devices:
            raise CaptureError(
                "refused",
                f"devices = {devices}, but this worker's XLA backend already started with {have} CPU device(s); "
                "the count is fixed when the backend starts: trace in a fresh worker",
            )
        return
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_COUNT_FLAG)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{DEVICE_COUNT_FLAG}={devices}"])
    with contextlib.suppress(AttributeError, KeyError, ValueError, TypeError):
        config.update("jax_num_cpu_devices", devices)  # jax >= 0.4.35; XLA_FLAGS alone before that
