"""JAX's configuration before any user import: x64, the platform, the device to trace under and
the number of virtual CPU devices; an unavailable device is refused.

Devices are ``cpu``, ``cuda:N``, ``tpu`` and ``tpu:N`` (``protocol.DEVICE``). A TPU is opened
only here, in the capture's own process (a fork of the warm spare, which never starts a backend,
or a cold worker), and released when it exits: libtpu lets one process at a time hold the chip.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import TYPE_CHECKING, Protocol

from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.protocol import DEVICE_CHOICES, device_platform

if TYPE_CHECKING:
    from jax import Device


class _Config(Protocol):
    """``jax.config`` as configured here."""

    def update(self, name: str, value: object, /) -> None: ...


def configure_jax(device: str, x64: bool, jax_ready: bool, devices: int | None = None) -> Device | None:
    """Set x64, the platform and the number of CPU devices before any user import; an
    unavailable device is ``refused``.

    ``devices``: N virtual CPU devices (``--xla_force_host_platform_device_count``), which only
    take effect before the XLA backend starts. A forked capture of the warm spare starts its own
    backend (the spare never does), so every capture gets the count it asks for; a process whose
    backend already runs with another count refuses rather than trace with the wrong one.
    Returns the device to trace under (None for the CPU: tracing needs no backend at all).
    """
    from jaxlsp.worker.tracing import jaxcompat

    parsed = device_platform(device)
    if parsed is None:
        raise CaptureError("refused", f"unknown device {device!r}: expected {DEVICE_CHOICES}")
    platform, index = parsed
    if devices is not None and device != "cpu":
        raise CaptureError(
            "refused", f"devices = {devices} makes virtual CPU devices; the profile's device is {device}"
        )
    try:
        import jax
    except ImportError as exc:
        raise CaptureError("refused", f"jax is not installed in this interpreter: {exc}") from None
    config: _Config = jax.config
    config.update("jax_enable_x64", bool(x64))
    initialised = jaxcompat.backends_initialized()
    if devices is not None:
        _cpu_devices(config, devices, initialised)
    if platform == "cpu":
        if not initialised:
            config.update("jax_platforms", "cpu")
        return None
    if not initialised:
        # The CPU stays beside a TPU, as on a TPU machine where the user runs the program: the
        # accelerator is the default backend, host-side helpers keep theirs.
        config.update("jax_platforms", platform if platform == "cuda" else f"{platform},cpu")
    try:
        found = jax.devices(platform)
    except Exception as exc:
        raise CaptureError("refused", _unavailable(device, platform, exc)) from None
    if index >= len(found):
        raise CaptureError(
            "refused", f"device {device} is unavailable: only {len(found)} {platform.upper()} device(s) found"
        )
    return found[index]


# libtpu's advice when the chip is held ('Run "$ sudo rm /tmp/libtpu_lockfile"'): removing the
# lock under a running program breaks that program, so it is never passed on as a fix.
_LOCK_ADVICE = re.compile(r"""[\s.;:,]*(?:Run\s*)?["'`]?\$?\s*(?:sudo\s+)?rm\s+(?:-f\s+)?\S*libtpu_lockfile["'`]?\.?""")
_HOLDER = re.compile(r"(?:process|pid)\s+(?:with\s+pid\s+)?(\d+)", re.IGNORECASE)


def held_chip(platform: str, text: str) -> bool:
    """Whether ``text`` (JAX's or libtpu's error) says another process holds the TPU."""
    lower = text.lower()
    return platform == "tpu" and ("lockfile" in lower or "in use" in lower or "busy" in lower)


def _unavailable(device: str, platform: str, exc: Exception) -> str:
    """Why ``device`` could not be opened, with JAX's own words; a TPU held by another program
    says so first (libtpu lets one process at a time open the chip, and never falls back), and
    libtpu's advice to remove its lock file is left out."""
    said = str(exc)
    if not held_chip(platform, said):
        return f"device {device} is unavailable: {type(exc).__name__}: {said}"
    holder = _HOLDER.search(said)
    who = f" (process {holder.group(1)})" if holder else ""
    words = _LOCK_ADVICE.sub("", said).strip() or "no words"
    return (
        f"device {device} is held by another program{who}: one process at a time can hold a TPU, and another "
        "(a training run, a notebook, another capture) has it; stop that program, or trace on the CPU "
        f"(--device cpu). libtpu said: {type(exc).__name__}: {words} (its advice to remove "
        "/tmp/libtpu_lockfile is left out: removing the lock under a running program breaks it)"
    )


DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def _cpu_devices(config: _Config, devices: int, initialised: bool) -> None:
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
