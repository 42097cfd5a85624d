"""How one capture runs: its time limit, memory cap, callbacks and cancel event, as one value.

Every layer that runs a capture (the capture service, the warm pool, a cold worker, the
supervisor) takes a :class:`CaptureOptions` instead of the same five keywords each.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:  # annotations only: the CLI's early worker starts before asyncio is imported
    import asyncio

DEFAULT_MEMORY_MB: Final = 8192
DEFAULT_TIMEOUT: Final = 60.0
# a run of the workspace's own example counts the example's work up to the target's call (data,
# model set-up, the tests before it in the session): a real test suite's first call takes longer
EXAMPLE_TIMEOUT: Final = 300.0

LogCallback = Callable[[str, str], None]  # (stream "stdout" | "stderr", text)
PhaseCallback = Callable[[str], None]  # the worker starts a phase: "import", "trace", "build"
LearnedCallback = Callable[[list[dict[str, Any]]], None]  # a learning run's records, sent as it runs


class _Default(enum.Enum):
    TOKEN = "default"


#: ``memory_mb`` default: :data:`DEFAULT_MEMORY_MB` for CPU profiles, no cap for ``cuda:N`` or ``tpu``
#: (libtpu maps the chip's memory into the address space: under the cap it fails with "Couldn't mmap").
DEFAULT: Final = _Default.TOKEN
MemoryLimit = int | None | Literal[_Default.TOKEN]


@dataclass(frozen=True)
class CaptureOptions:
    """``timeout``: seconds before the worker is killed. ``memory_mb``: its address-space cap
    (None: none). ``on_log(stream, text)`` hears output as it arrives (the head of each stream
    only; the outcome keeps head and tail); ``on_phase(name)`` hears the worker start ``import``,
    ``trace`` and ``build``; ``on_learned(records)`` hears a learning run's new signature records
    while its example runs (the result holds them all again). ``cancel`` set: the capture's
    process group is killed at once and :class:`asyncio.CancelledError` raised (cancelling the
    calling task does the same). ``example_timeout``: the limit instead when the capture runs one
    of the workspace's examples up to the target's call (a caller's own ``timeout`` sets both).
    ``reuse`` (live traces): when the target's files changed since its newest kept trace only
    where their syntax trees stay the same, that trace's graph with its positions moved stands
    for a capture (capture/reuse.py), and an NNX or Equinox model's init snapshot may stand for
    its constructor (worker/reuse/initsnap.py); without it (the user's own trace) everything runs."""

    timeout: float = DEFAULT_TIMEOUT
    example_timeout: float = EXAMPLE_TIMEOUT
    memory_mb: MemoryLimit = DEFAULT
    on_log: LogCallback | None = None
    on_phase: PhaseCallback | None = None
    on_learned: LearnedCallback | None = None
    cancel: asyncio.Event | None = None
    reuse: bool = False

    def memory_for(self, request: Mapping[str, Any]) -> int | None:
        """The cap in MiB for ``request`` (its profile's device decides the default)."""
        if self.memory_mb is not DEFAULT:
            return self.memory_mb if self.memory_mb and self.memory_mb > 0 else None
        device = str((request.get("profile") or {}).get("device") or "cpu")
        return None if device.startswith(("cuda", "gpu", "rocm", "tpu")) else DEFAULT_MEMORY_MB


@dataclass(frozen=True)
class Launch:
    """How one capture process was started, for the supervisor's report: the interpreter, the
    route, when the capture began (``time.monotonic``), the time limit its error names, and the
    resolved memory cap."""

    python: str
    via: Literal["cold", "spare"]
    started: float
    limit: float
    memory_mb: int | None
    result_bytes: int | None = None  # the result pipe's cap (supervise.result_limit); None: the default


#: The defaults, as one shared value for signatures (the type is frozen).
DEFAULT_OPTIONS: Final = CaptureOptions()
