"""Watch one running capture: drain its pipes, enforce the deadline, kill its group, classify.

Shared by the cold path (:mod:`jaxlsp.capture.launch.client`) and the warm spare
(:mod:`jaxlsp.capture.launch.spare`); they differ only in how the worker is started and how its exit is
seen (:class:`Child`). The rules:

- stdout and stderr are read concurrently with everything else, so a chatty worker never blocks
  on a full pipe; only the first and last :data:`LOG_HEAD` / :data:`LOG_TAIL` bytes of each are kept.
- the result pipe is read concurrently too (a large graph does not fit in a pipe's buffer).
- the deadline covers everything from the start to the exit; at the deadline, on cancellation,
  and after every capture (success included) the worker's whole process group is SIGKILLed, then
  its leader reaped, then the group waited for until it is empty (bounded).
- the group is killed while its leader is a zombie (exit seen, not yet reaped), so the kill can
  never hit an unrelated process that reused the number.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import glob
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from jaxlsp.capture.launch import phases
from jaxlsp.capture.launch.options import CaptureOptions, Launch, LearnedCallback, LogCallback, PhaseCallback
from jaxlsp.graph import collector, slices
from jaxlsp.offloop import off_loop
from jaxlsp.worker.protocol import ErrorInfo, ErrorKind, ErrorKindName, WorkerResult

log = logging.getLogger(__name__)

LOG_HEAD = 512 * 1024  # bytes kept from the start of each of stdout and stderr
LOG_TAIL = 512 * 1024  # bytes kept from the end of each
RESULT_LIMIT = 256 * 1024 * 1024  # without limits in the request, a larger result is refused, not buffered
RESULT_HEADROOM = 1024 * 1024  # above the request's bytes limit: the worker's phase lines, its own refusal
RESULT_EXIT_GRACE = 2.0  # seconds a worker may linger after its whole result arrived
DRAIN_GRACE = 2.0  # seconds to wait for pipes still held open by escaped processes
GROUP_GONE_TIMEOUT = 5.0  # seconds to wait for a killed group to disappear
STDERR_TAIL_CHARS = 4000  # of stderr, in a crash's error


_MEMORY_MARKERS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory", "OutOfMemory")


@dataclass
class CaptureOutcome:
    """What one capture produced. ``result`` always follows the protocol's ``WorkerResult``:
    failures of the process itself (timeout, crash, memory) arrive as ``ok: False`` errors."""

    result: WorkerResult
    stdout: str
    stderr: str
    wall: float  # seconds from the request to the outcome
    python: str  # the interpreter that ran the capture
    via: Literal["cold", "spare"]
    exit_code: int | None = None  # negative: killed by that signal; None: not known
    truncated: bool = False  # some output was left out of stdout / stderr
    pgid: int | None = None  # the worker's process group (gone by the time this is returned)

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @property
    def logs(self) -> str:
        """stdout then stderr, each under a heading when both have something."""
        parts = [(name, text) for name, text in (("stdout", self.stdout), ("stderr", self.stderr)) if text]
        if len(parts) == 1:
            return parts[0][1]
        return "".join(f"--- {name} ---\n{text}{'' if text.endswith(chr(10)) else chr(10)}" for name, text in parts)


SCRATCH_PREFIX = "jaxlsp-capture-"  # + the worker's process group id + "-": see worker/process/main.py


def settle(future: asyncio.Future[None]) -> None:
    """Resolve ``future`` unless it already is (a callback for readiness notifications)."""
    if not future.done():
        future.set_result(None)


def error_result(kind: ErrorKind | ErrorKindName, message: str, trace: str | None = None) -> WorkerResult:
    error: ErrorInfo = {"kind": ErrorKind(kind), "message": message}
    if trace:
        error["traceback"] = trace
    return {"ok": False, "error": error}


# -- buffers ----------------------------------------------------------------------------------------


class LogBuffer:
    """Keeps the head and the tail of a stream; counts what it left out."""

    def __init__(self, head: int = LOG_HEAD, tail: int = LOG_TAIL) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit:
                del self.tail[: -self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + min(len(self.tail), self.tail_limit)

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode(errors="replace")
        omitted = self.total - len(self.head) - len(tail)
        marker = f"\n[... jaxlsp: {omitted:,} bytes of output left out ...]\n"
        return bytes(self.head).decode(errors="replace") + marker + tail.decode(errors="replace")


class PipeReader:
    """Reads a non-blocking pipe on the event loop until EOF, feeding ``sink``."""

    CHUNK = 256 * 1024

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, sink: Callable[[bytes], None]) -> None:
        self.loop, self.fd, self.sink = loop, fd, sink
        self.eof: asyncio.Future[None] = loop.create_future()
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._ready)

    def _ready(self) -> None:
        try:
            data = os.read(self.fd, self.CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.sink(data)
        else:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
        if not self.eof.done():
            self.eof.set_result(None)


class _StreamSink:
    def __init__(self, name: str, on_log: LogCallback | None) -> None:
        self.name, self.on_log = name, on_log
        self.buffer = LogBuffer()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.told_truncated = False

    def __call__(self, data: bytes) -> None:
        before = len(self.buffer.head)
        self.buffer.feed(data)
        if self.on_log is None:
            return
        fresh = bytes(self.buffer.head[before:])
        text = self.decoder.decode(fresh) if fresh else ""
        full = len(self.buffer.head) >= self.buffer.head_limit
        if full and self.buffer.total > len(self.buffer.head) and not self.told_truncated:
            self.told_truncated = True
            text += f"\n[... jaxlsp: {self.name} continues; only its end is kept ...]\n"
        if text:
            try:
                self.on_log(self.name, text)
            except Exception:
                log.exception("on_log callback failed")


def result_limit(request: Mapping[str, Any]) -> int:
    """The cap of a capture's result pipe: the request's bytes limit (which the worker enforces
    itself, with its figures) and some headroom, so that a raised ``--max-bytes`` /
    ``jaxlsp.limits.bytes`` holds end to end; :data:`RESULT_LIMIT` for a request without limits."""
    from jaxlsp.worker.protocol import resolve_limits

    raw = request.get("limits")
    if raw is None:
        return RESULT_LIMIT
    return resolve_limits(raw)["bytes"] + RESULT_HEADROOM


class _ResultSink:
    """The result pipe: ``#phase NAME`` and ``#learned [records]`` lines (the worker's progress),
    then one JSON result."""

    def __init__(
        self,
        limit: int = RESULT_LIMIT,
        on_phase: PhaseCallback | None = None,
        on_learned: LearnedCallback | None = None,
    ) -> None:
        self.data = bytearray()
        self.limit = limit
        self.overflow = False
        self.size = 0  # every byte that arrived, the ones past an overflow too (for the refusal's figures)
        self.on_phase = on_phase
        self.on_learned = on_learned
        self.preamble = True  # still reading phase lines

    def __call__(self, data: bytes) -> None:
        self.size += len(data)
        if self.overflow:
            return
        if len(self.data) + len(data) > self.limit:
            self.overflow = True
            self.data = bytearray()
            return
        self.data += data
        while self.preamble and self.data:
            if self.data[:1] != b"#":
                self.preamble = False
                break
            end = self.data.find(b"\n")
            if end < 0:
                break  # the rest of the line is still on its way
            line = bytes(self.data[1:end]).decode("utf-8", errors="replace")
            del self.data[: end + 1]
            kind, _, value = line.partition(" ")
            if kind == "phase" and self.on_phase is not None:
                try:
                    self.on_phase(value)
                except Exception:
                    log.exception("on_phase callback failed")
            elif kind == "learned" and self.on_learned is not None:
                try:
                    records = json.loads(value)
                except ValueError:
                    continue  # a line cut short: the result holds every record again
                if isinstance(records, list):
                    try:
                        self.on_learned([r for r in records if isinstance(r, dict)])
                    except Exception:
                        log.exception("on_learned callback failed")


# -- the process group ----------------------------------------------------------------------------


class Child(Protocol):
    """One running worker, leader of its own process group (``pgid``)."""

    pgid: int

    async def wait_exit(self) -> None:
        """Return once the leader has exited; it must not be reaped yet where that can be helped."""

    async def kill(self) -> None:
        """SIGKILL the whole group (never a reaped, hence reusable, leader's number)."""

    async def reap(self) -> int | None:
        """Reap the leader after :meth:`kill`; its exit code (negative: signal), None if unknown."""


def killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's group took the number: ours is gone
    if not sys.platform.startswith("linux"):
        return True
    return any(True for _ in _linux_members(pgid))


def _linux_members(pgid: int) -> list[int]:
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields and fields[0] != b"Z" and int(fields[2]) == pgid:
            members.append(int(name))
    return members


async def wait_group_gone(pgid: int, timeout: float = GROUP_GONE_TIMEOUT) -> bool:
    """Kill and wait until group ``pgid`` is empty; False if something survived ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while group_alive(pgid):
        if time.monotonic() > deadline:
            log.warning("process group %d survived SIGKILL for %.1f s", pgid, timeout)
            return False
        killpg(pgid)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True


# -- supervision ----------------------------------------------------------------------------------


@dataclass
class Pipes:
    """The parent's read ends of the worker's stdout, stderr and result pipes."""

    stdout: int
    stderr: int
    result: int


async def supervise(
    child: Child,
    pipes: Pipes,
    options: CaptureOptions,
    launch: Launch,
    extra_tasks: tuple[asyncio.Future[Any], ...] = (),
    workspace: str | None = None,
) -> CaptureOutcome:
    """Run ``child`` to its end (or the deadline, or ``options.cancel``) and say what it produced.

    The deadline is ``launch.limit`` seconds after ``launch.started``. At the deadline the worker is
    asked where it is (``SIGUSR1``: faulthandler prints its Python stack on stderr) before it is
    killed, and the timeout names its innermost line under ``workspace``. Raises
    :class:`asyncio.CancelledError` when the cancel event is set or the calling task is cancelled,
    in both cases only after the whole group is gone.
    """
    on_log, on_phase, cancel = options.on_log, options.on_phase, options.cancel
    timeout = max(launch.limit - (time.monotonic() - launch.started), 0.001)
    loop = asyncio.get_running_loop()
    out, err, res = (
        _StreamSink("stdout", on_log),
        _StreamSink("stderr", on_log),
        _ResultSink(launch.result_bytes or RESULT_LIMIT, on_phase=on_phase, on_learned=options.on_learned),
    )
    readers = [
        PipeReader(loop, pipes.stdout, out),
        PipeReader(loop, pipes.stderr, err),
        PipeReader(loop, pipes.result, res),
    ]
    exited = asyncio.ensure_future(child.wait_exit())
    cancelled = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    deadline = loop.time() + timeout
    timed_out = False
    growth: tuple[int, int] | None = None  # resident bytes at the deadline, and their growth
    lingered = False
    exit_code: int | None = None
    result_at: float | None = None  # when the whole result had arrived
    try:
        while True:
            if result_at is None and readers[2].eof.done():
                result_at = loop.time()
                phases.mark("result")
            until = deadline if result_at is None else min(deadline, result_at + RESULT_EXIT_GRACE)
            waiting: set[asyncio.Future[Any]] = {exited}
            if cancelled is not None:
                waiting.add(cancelled)
            if result_at is None:
                waiting.add(readers[2].eof)
            remaining = until - loop.time()
            if remaining > 0:
                await asyncio.wait(waiting, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if cancelled is not None and cancelled.done():
                raise asyncio.CancelledError
            if result_at is None and readers[2].eof.done():
                continue  # marked first, when the child's exit came in the same wait (a loaded machine)
            if exited.done():
                break
            if loop.time() >= until:
                lingered, timed_out = result_at is not None, result_at is None
                break
        if timed_out and not exited.done():
            growth = await memory_growth(child.pgid)
            await _ask_where(child, err, exited)
        await child.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(exited), timeout=GROUP_GONE_TIMEOUT)
        exit_code = await child.reap()
        await kill_cgroup(child)
        # Pipes still open now are held by processes that escaped the group (setsid): wait a little.
        await asyncio.wait([r.eof for r in readers], timeout=DRAIN_GRACE)
        if result_at is None and readers[2].eof.done():
            phases.mark("result")  # the result's end was read only after the exit: the span still splits
        await wait_group_gone(child.pgid)
        phases.mark("reap")
    except BaseException:
        await _abandon(child, exited)
        raise
    finally:
        for task in (cancelled, *extra_tasks):
            if task is not None and not task.done():
                task.cancel()
        for reader in readers:
            reader.close()

    wall = time.monotonic() - launch.started
    stderr = err.buffer.text()
    # A big graph's result is tens of megabytes of JSON: decoded off the loop (jaxlsp/offloop.py)
    result = await off_loop(
        _classify,
        res,
        exit_code=exit_code,
        stderr=stderr,
        timed_out=timed_out,
        lingered=lingered,
        timeout=launch.limit,
        memory_mb=launch.memory_mb,
        via=launch.via,
        workspace=workspace,
        growth=growth,
    )
    phases.mark("parse")
    remove_scratch(child.pgid)
    return CaptureOutcome(
        result=result,
        stdout=out.buffer.text(),
        stderr=stderr,
        wall=wall,
        python=launch.python,
        via=launch.via,
        exit_code=exit_code,
        truncated=out.buffer.truncated or err.buffer.truncated,
        pgid=child.pgid,
    )


def remove_scratch(pgid: int | None) -> None:
    """Remove the scratch folders a worker group made (``jaxlsp-capture-<pgid>-*``).

    A worker removes its own on a normal exit; one that was killed, crashed or called
    ``os._exit`` cannot, so the supervisor does it once the group is gone.
    """
    if pgid is None:
        return
    # Workers inherit our environment, but Python caches the temp folder: look where TMPDIR points
    # now as well as where it pointed when first asked.
    roots = {tempfile.gettempdir(), *(os.environ[k] for k in ("TMPDIR", "TEMP", "TMP") if os.environ.get(k))}
    for root in roots:
        for path in glob.glob(os.path.join(root, f"{SCRATCH_PREFIX}{pgid}-*")):
            shutil.rmtree(path, ignore_errors=True)


async def _abandon(child: Child, exited: asyncio.Future[None]) -> None:
    """Kill and reap after cancellation, even if cancelled again meanwhile."""
    try:
        await asyncio.shield(_finish(child, exited))
    except asyncio.CancelledError:
        killpg(child.pgid)  # cancelled again: the shielded task still finishes the job


async def _finish(child: Child, exited: asyncio.Future[None]) -> None:
    try:
        await child.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(exited), timeout=GROUP_GONE_TIMEOUT)
        await child.reap()
        await kill_cgroup(child)
        await wait_group_gone(child.pgid)
    except Exception:
        log.exception("cleaning up capture group %d", child.pgid)
        killpg(child.pgid)
    finally:
        if not exited.done():
            exited.cancel()


async def kill_cgroup(child: Child) -> None:
    """Kill the capture's cgroup, when its child has one (the cold path, where allowed): it holds
    what escaped the process group (setsid daemons), which would otherwise outlive the capture."""
    cgroup = getattr(child, "cgroup", None)
    if cgroup:
        from jaxlsp.worker.containment import cgroup_kill

        if not await asyncio.to_thread(cgroup_kill, cgroup):
            log.warning("capture cgroup %s survived SIGKILL", cgroup)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name} (signal {-code})"
    return f"exited with status {code}"


async def _ask_where(child: Child, err: _StreamSink, exited: asyncio.Future[None]) -> None:
    """Ask a worker that ran out of time for its Python stack (``SIGUSR1``, which the worker's
    faulthandler answers on stderr, even from inside C code) and wait a moment for it."""
    before = err.buffer.text().count(STACK_MARK)
    try:
        os.kill(child.pgid, signal.SIGUSR1)  # the group's leader is the worker, not yet reaped
    except (ProcessLookupError, PermissionError, OSError):
        return
    deadline = time.monotonic() + WHERE_GRACE
    delay = 0.005
    while time.monotonic() < deadline and not exited.done():
        if err.buffer.text().count(STACK_MARK) > before:
            await asyncio.sleep(0.02)  # the rest of the dump is a few writes behind its first line
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


STACK_MARK = "(most recent call first):"  # faulthandler's heading of each thread's stack
WHERE_GRACE = 1.0  # seconds a timed-out worker has to print where it is
_DUMP_LINE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def where_from_stack(stderr: str, workspace: str | None) -> dict[str, Any] | None:
    """The innermost frame under ``workspace`` in the last stack faulthandler printed, as the
    protocol's frame (plus ``function``), or None."""
    if not workspace or STACK_MARK not in stderr:
        return None
    root = os.path.realpath(workspace)
    # One block per thread, innermost frame first; the main thread (the user's code) comes last.
    for block in reversed(stderr.split(STACK_MARK)[1:]):
        where = _first_workspace_frame(block, root)
        if where is not None:
            return where
    return None


def _first_workspace_frame(block: str, root: str) -> dict[str, Any] | None:
    for line in block.splitlines():
        found = _DUMP_LINE.match(line)
        if found is None:
            continue
        path = os.path.realpath(found.group("path"))
        rel = os.path.relpath(path, root) if path.startswith(root + os.sep) else None
        parts = rel.split(os.sep) if rel is not None else []
        if rel is None or any(p in ("site-packages", "dist-packages") or p.startswith(".venv") for p in parts):
            continue
        number = int(found.group("line"))
        text = ""
        with contextlib.suppress(OSError, UnicodeDecodeError), open(path, encoding="utf-8") as f:
            for i, source in enumerate(f, 1):
                if i == number:
                    text = source.rstrip("\r\n")
                    break
        column = len(text) - len(text.lstrip())
        return {
            "path": path,
            "line": number,
            "column": column,
            "endLine": number,
            "endColumn": max(len(text), column + 1),
            "function": found.group("function"),
        }
    return None


def _classify(
    res: _ResultSink,
    *,
    exit_code: int | None,
    stderr: str,
    timed_out: bool,
    lingered: bool,
    timeout: float,
    memory_mb: int | None,
    via: str,
    workspace: str | None = None,
    growth: tuple[int, int] | None = None,
) -> WorkerResult:
    tail = stderr[-STDERR_TAIL_CHARS:].strip()
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    while lines and lines[-1].startswith(("Extension modules:", "Current thread", 'File "')):
        lines.pop()  # faulthandler's epilogue says less than the line above it
    last = lines[-1] if lines else ""
    said = f" Its last words: {last}" if last else ""
    if res.overflow:
        mib = 1024 * 1024
        return error_result(
            "refused",
            f"the capture's result is {res.size:,} bytes ({res.size / mib:.1f} MiB), over the limit of "
            f"{res.limit:,} bytes ({res.limit / mib:.1f} MiB) of the result pipe; nothing was cut (a graph is "
            "never truncated). Raise the limit with the setting jaxlsp.limits.bytes (initializationOptions) or "
            "--max-bytes on the command line, or trace a smaller part of the model",
            tail or None,
        )
    if res.data and not res.preamble and not timed_out:  # a half phase line is no result
        try:
            with collector.paused():
                parsed = slices.loads(bytes(res.data), depth=3)  # in slices: the loop runs meanwhile
        except (ValueError, UnicodeDecodeError) as exc:
            return error_result(
                "crash",
                f"The capture worker {describe_exit(exit_code)} after sending an unreadable result ({exc}).{said}",
                tail or None,
            )
        if isinstance(parsed, dict) and isinstance(parsed.get("ok"), bool):
            if lingered:
                log.info("capture worker lingered after its result; killed")
            return cast(WorkerResult, parsed)
        return error_result(
            "crash", f"The capture worker sent a result that is not a WorkerResult object.{said}", tail or None
        )
    if timed_out and growth is not None and allocating(*growth):
        resident, grew = growth
        limit = f"its cap is {memory_mb:,} MiB of address space" if memory_mb else "no cap was set"
        result = error_result(
            "memory",
            f"The capture was still allocating memory when its time limit of {_seconds(timeout)} s ran out: "
            f"{resident / MIB:,.0f} MiB resident at its peak, {grew / MIB:,.0f} MiB more within the last second "
            f"({limit}); the worker and every process it started were stopped.{_at(stderr, workspace)} "
            "Look for a buffer or list that grows without end.",
            tail or None,
        )
        where = where_from_stack(stderr, workspace)
        if where is not None:
            where.pop("function")
            result["error"]["frame"] = where
        return result
    if timed_out:
        where = where_from_stack(stderr, workspace)
        at = ""
        if where is not None:
            shown = where["path"]
            if workspace and os.path.isabs(shown):  # workspace-relative, as graphs name paths
                shown = os.path.relpath(shown, os.path.realpath(workspace)).replace(os.sep, "/")
            at = f" It was running {where.pop('function')} at {shown}:{where['line']} when the time ran out."
        result = error_result(
            "timeout",
            f"The capture did not finish within {_seconds(timeout)} s (the time limit); the worker and every "
            f"process it started were stopped.{at} Raise the timeout if the target is slow to import or trace.",
            tail or None,
        )
        if where is not None:
            result["error"]["frame"] = where
        return result
    killed_outside = exit_code == -signal.SIGKILL
    if any(marker in tail for marker in _MEMORY_MARKERS) or killed_outside:
        limit = f"the limit is {memory_mb:,} MiB of address space" if memory_mb else "no limit was set"
        why = "was killed (SIGKILL, likely by the system's out-of-memory killer)" if killed_outside else "ran out"
        return error_result(
            "memory",
            f"The capture {why} of memory before producing a result ({limit}).{said}",
            tail or None,
        )
    return error_result(
        "crash",
        f"The capture worker {describe_exit(exit_code)} without sending a result.{said}",
        tail or None,
    )


def _at(stderr: str, workspace: str | None) -> str:
    where = where_from_stack(stderr, workspace)
    return "" if where is None else f" It was running {where['function']} at {where['path']}:{where['line']}."


MIB = 1024 * 1024
GROWTH_WINDOW = 1.0  # seconds at most of looks at a timed-out worker's memory
GROWTH_STEP = 0.1  # seconds between two looks
GROWING = 16 * MIB  # peak resident bytes gained in that window that say "still allocating"
LARGE = 512 * MIB  # ... when the worker holds at least this much (jax itself: about 300 MiB)


def allocating(resident: int, grew: int) -> bool:
    """Whether a worker that ran out of time was busy allocating: large and still growing fast.

    Growth that copies (``bytearray +=``) slows as the buffer grows, so it reaches the time limit
    long before the address-space cap (150 MiB/s at 5 GiB, measured): that is a memory failure,
    not a slow trace. A busy loop or a slow compile holds steady and stays a ``timeout``."""
    return resident >= LARGE and grew >= GROWING


def resident_bytes(pid: int, field: bytes = b"VmRSS:") -> int | None:
    """``VmRSS`` (or another ``/proc/PID/status`` size such as ``VmHWM:``) of ``pid`` (Linux; None
    elsewhere or when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


async def memory_growth(pid: int) -> tuple[int, int] | None:
    """The worker's peak resident bytes and what that peak gained within :data:`GROWTH_WINDOW`.

    The peak (``VmHWM``), not the resident size: a copying growth doubles its resident size while
    it copies and halves it after, so two looks at ``VmRSS`` can see it shrink (a CI run reported
    a 5 GiB ``bytearray +=`` loop as a plain timeout); its peak only rises."""
    first = resident_bytes(pid, b"VmHWM:")
    if first is None:
        return None
    peak = first
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GROWTH_WINDOW
    while loop.time() < deadline and peak - first < GROWING:
        await asyncio.sleep(GROWTH_STEP)
        now = resident_bytes(pid, b"VmHWM:")
        if now is None:
            break
        peak = max(peak, now)
    return peak, peak - first


def _seconds(value: float) -> str:
    """``240`` or ``27.7``: a time limit as a person writes it (auto's later runs get what is left)."""
    return f"{value:g}" if float(value).is_integer() else f"{value:.1f}"
