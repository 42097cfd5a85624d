"""The profiler's trace read back: each HLO op's device time (runs in the user's interpreter).

``jax.profiler`` writes an XSpace (``*.xplane.pb``) that ``jax.profiler.ProfileData`` reads as
planes of lines (threads, streams) of timed events. An event that executed an HLO instruction
names it in a stat: ``hlo_op`` (and ``hlo_module``, ``device_ordinal``) on the CPU, where the
events lie on the host plane's threads; on an accelerator the kernel events lie on its own plane
(``/device:GPU:0``) and carry the names in an annotation string
(``fusion.3:#hlo_op=fusion.3,hlo_module=jit_f,program_id=7#``). Nothing here depends on thread or
stream names: an event is an op's when its stats name one.

A TPU's plane (``/device:TPU:0``, measured with JAX 0.10.2 on a v5e) is read by its lines' names,
as the profiler's own viewer does: ``XLA Ops`` holds one event per instruction run, named by the
instruction's HLO text (``%fusion.2 = bf16[512,512]{...} fusion(...)``) with no op stat, and
``XLA Modules`` one per program run (``jit_mlp(2245751981231649343)``), whose span says which
program an op belongs to. ``Async XLA Ops`` spans an asynchronous op from its start to its done
(a weight's ``copy-start`` prefetch while the matmuls run) and is left out: the two halves are
``XLA Ops`` events already, and the span between them is the device doing other ops, so an async
op counts once.

Two things keep the figures additive, so that the ops' times add up to the device's busy time:

- nesting: a ``while``, ``conditional`` or ``call`` event on the CPU encloses its body's events
  on the same line; each instant of a line belongs to its innermost open event (self time);
- concurrency: ops running at the same instant on one device (the CPU's thunk executor on
  several threads, a GPU's streams) share that instant equally.

So every op's seconds add up, per device, to the union of its events: the device's busy time.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

_ANNOTATED_OP = re.compile(r"[#,]hlo_op=([^,#]+)")
_ANNOTATED_MODULE = re.compile(r"[#,]hlo_module=([^,#]+)")
DEVICE_PLANE = "/device:"
OPS_LINE = "XLA Ops"  # a TPU plane's line of instruction events, named by their HLO text
MODULES_LINE = "XLA Modules"  # a TPU plane's line of program runs: ``jit_f(<program id>)``
ASYNC_LINE = "Async XLA Ops"  # start-to-done spans of async ops: their halves are on OPS_LINE
_HLO_TEXT_NAME = re.compile(r"^%?([^\s=%]+)\s*=")
_MODULE_RUN = re.compile(r"^(.*?)\(\d+\)$")


class ProfileEvent(Protocol):
    """What is read of an event of ``jax.profiler.ProfileData`` (jaxlib ships no stubs for it)."""

    @property
    def name(self) -> str: ...
    @property
    def start_ns(self) -> float: ...
    @property
    def duration_ns(self) -> float: ...
    @property
    def stats(self) -> Iterable[tuple[str, object]]: ...


class ProfileLine(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def events(self) -> Iterable[ProfileEvent]: ...


class ProfilePlane(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def lines(self) -> Iterable[ProfileLine]: ...


class Profile(Protocol):
    """A ``jax.profiler.ProfileData``: its planes (a device's, the host's), their lines, their events."""

    @property
    def planes(self) -> Iterable[ProfilePlane]: ...


class ProfileError(Exception):
    """The profile holds no event of the program (a clear sentence for the user)."""


@dataclass
class Span:
    """One op's event on one line: nanoseconds from the profile's start."""

    start: float
    end: float
    op: str


@dataclass
class DeviceTimes:
    """What the profile says the program's ops took, summed over every run profiled."""

    ops: dict[str, float] = field(default_factory=dict)  # HLO instruction -> seconds (all devices, all runs)
    counts: dict[str, int] = field(default_factory=dict)  # HLO instruction -> events
    busy: dict[str, float] = field(default_factory=dict)  # device -> seconds it ran any op of the program
    where: str = "host"  # "device": an accelerator's own timeline; "host": the CPU's threads
    modules: list[str] = field(default_factory=list)  # the HLO module names among the events kept
    others: list[str] = field(default_factory=list)  # other HLO modules that ran while profiling

    @property
    def total(self) -> float:
        return sum(self.busy.values())


def op_of(stats: Iterable[tuple[str, object]]) -> tuple[str | None, str | None, str | None]:
    """The HLO instruction, module and device ordinal an event's stats name (None where absent)."""
    op = module = ordinal = None
    annotation = None
    for name, value in stats:
        if name == "hlo_op":
            op = str(value)
        elif name == "hlo_module":
            module = str(value)
        elif name == "device_ordinal":
            ordinal = str(value)
        elif isinstance(value, str) and "hlo_op=" in value:
            annotation = value
    if op is None and annotation is not None:
        # An annotation stack ("module::kernel") names the innermost op last.
        ops = _ANNOTATED_OP.findall(annotation)
        modules = _ANNOTATED_MODULE.findall(annotation)
        op = ops[-1] if ops else None
        module = module or (modules[-1] if modules else None)
    return op, module, ordinal


def op_named(name: str) -> str | None:
    """The instruction an ``XLA Ops`` event's name gives: ``%fusion.2 = bf16[...] fusion(...)``
    or a bare ``fusion.2``; None for an empty name."""
    name = str(name).strip()
    found = _HLO_TEXT_NAME.match(name)
    if found:
        return found.group(1)
    if not name or " " in name:
        return None
    return name.lstrip("%")


def module_runs(lines: Iterable[ProfileLine]) -> list[tuple[float, float, str]]:
    """A TPU plane's program runs (start, end, module name) from its ``XLA Modules`` line."""
    out: list[tuple[float, float, str]] = []
    for line in lines:
        if str(line.name) != MODULES_LINE:
            continue
        for event in line.events:
            found = _MODULE_RUN.match(str(event.name))
            start = float(event.start_ns)
            out.append((start, start + float(event.duration_ns), found.group(1) if found else str(event.name)))
    return sorted(out)


def _module_at(runs: list[tuple[float, float, str]], t: float) -> str | None:
    """The module whose run holds instant ``t`` (the last run started at or before it)."""
    k = bisect.bisect_right(runs, (t, math.inf, "")) - 1
    return runs[k][2] if k >= 0 and runs[k][0] <= t <= runs[k][1] else None


def self_spans(events: list[tuple[float, float, str]]) -> list[Span]:
    """The events of one line (start, end, op) as spans of self time: each instant belongs to the
    innermost event open at it (a ``while`` event holds its body's events). Events that overlap
    without nesting (never seen on one line) are cut at the later one's start."""
    out: list[Span] = []
    stack: list[tuple[float, str]] = []  # (end, op) of the open events, innermost last
    cursor = 0.0  # where the innermost open event's self time resumes

    def close_until(t: float) -> None:
        nonlocal cursor
        while stack and stack[-1][0] <= t:
            end, op = stack.pop()
            if end > cursor:
                out.append(Span(cursor, end, op))
            cursor = max(cursor, end)

    for start, end, op in sorted(events, key=lambda e: (e[0], -e[1])):
        close_until(start)
        if stack and start > cursor:
            out.append(Span(cursor, start, stack[-1][1]))
        cursor = max(cursor, start)
        if stack and end > stack[-1][0]:
            end = stack[-1][0]  # not nested: kept within its parent
        if end > start:
            stack.append((end, op))
    close_until(float("inf"))
    return [s for s in out if s.end > s.start]


def share_concurrent(spans: list[Span]) -> tuple[dict[str, float], float]:
    """Nanoseconds per op over one device's spans (from all its lines), an instant shared equally
    by the spans open at it; and the device's busy time (the union of the spans)."""
    points: list[tuple[float, int, int]] = []  # (time, 0 = end | 1 = start, span index)
    for i, s in enumerate(spans):
        points.append((s.start, 1, i))
        points.append((s.end, 0, i))
    points.sort()
    per_op: dict[str, float] = {}
    active: set[int] = set()
    busy = 0.0
    last = 0.0
    for t, kind, i in points:
        if active and t > last:
            dt = t - last
            busy += dt
            each = dt / len(active)
            for j in active:
                op = spans[j].op
                per_op[op] = per_op.get(op, 0.0) + each
        last = t
        if kind:
            active.add(i)
        else:
            active.discard(i)
    return per_op, busy


def read(data: Profile, module: str | None) -> DeviceTimes:
    """The op times of HLO module ``module`` (its events only; None: every module's) in a
    ``jax.profiler.ProfileData``. Raises ProfileError when no event names an op of it."""
    device_lines: dict[str, list[list[tuple[float, float, str]]]] = {}
    host_lines: dict[str, list[list[tuple[float, float, str]]]] = {}
    counts: dict[tuple[bool, str], int] = {}
    seen: dict[bool, set[str]] = {True: set(), False: set()}
    others: set[str] = set()
    for plane in data.planes:
        on_device = str(plane.name).startswith(DEVICE_PLANE)
        plane_lines = list(plane.lines)
        runs = module_runs(plane_lines) if on_device else []
        for line in plane_lines:
            if on_device and str(line.name) == ASYNC_LINE:
                continue
            named = on_device and str(line.name) == OPS_LINE
            kept: dict[str, list[tuple[float, float, str]]] = {}
            for event in line.events:
                op, mod, ordinal = op_of(event.stats)
                if op is None and named:
                    op = op_named(event.name)
                    mod = mod or _module_at(runs, float(event.start_ns))
                if op is None:
                    continue
                if module is not None and mod is not None and mod != module:
                    others.add(mod)
                    continue
                if mod is not None:
                    seen[on_device].add(mod)
                device = str(plane.name) if on_device else f"cpu:{ordinal or 0}"
                start = float(event.start_ns)
                kept.setdefault(device, []).append((start, start + float(event.duration_ns), op))
                counts[(on_device, op)] = counts.get((on_device, op), 0) + 1
            target = device_lines if on_device else host_lines
            for device, events in kept.items():
                target.setdefault(device, []).append(events)
    # An accelerator's own timeline when it has the program's ops: the host's are its launches.
    on_device = bool(device_lines)
    lines = device_lines if on_device else host_lines
    if not lines:
        ran = f" (what ran: {', '.join(sorted(others)[:5])})" if others else ""
        raise ProfileError(
            f"the profile holds no timed HLO op of {module or 'the program'}{ran}: "
            "the profiler recorded nothing for this backend"
        )
    out = DeviceTimes(where="device" if on_device else "host", modules=sorted(seen[on_device]))
    out.others = sorted(others - seen[on_device])
    for device, per_line in sorted(lines.items()):
        spans = [s for events in per_line for s in self_spans(events)]
        per_op, busy = share_concurrent(spans)
        out.busy[device] = busy * 1e-9
        for op, ns in per_op.items():
            out.ops[op] = out.ops.get(op, 0.0) + ns * 1e-9
    out.counts = {op: n for (dev, op), n in counts.items() if dev == on_device}
    return out
