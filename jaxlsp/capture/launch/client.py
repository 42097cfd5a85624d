"""Run one capture in the user's interpreter, safely: the cold path (a fresh worker process).

``run_capture`` starts ``[python, -I, -B, -c, BOOTSTRAP, ...]`` (see :mod:`jaxlsp.capture.launch.staging`)
in its own session and process group, writes the request to its stdin, reads the result from a
private pipe whose write end is the only descriptor it inherits (``request["resultFd"]``), drains
stdout / stderr concurrently, and enforces the deadline, the memory cap and cancellation
(:mod:`jaxlsp.capture.launch.supervise`). Whatever happens, no process of the group is left afterwards,
and failures of the process itself come back as protocol errors (``timeout``, ``memory``,
``crash``, ``refused``), never as exceptions; only cancellation raises.

Memory: the cap is a soft ``RLIMIT_AS`` (address space) set by the bootstrap before anything is
imported. Default :data:`~jaxlsp.capture.launch.options.DEFAULT_MEMORY_MB` = 8 GiB for CPU captures: importing
jax + flax + equinox reserves ~0.5 GB of address space and initialising the XLA CPU client ~1.5 GB (17
threads on 2 cores; more threads, hence more stacks, on larger machines); 1 GiB is too little
(``std::bad_alloc``). CUDA reserves tens of GiB of address space at initialisation, so a
``cuda:N`` profile gets no cap by default. ``RLIMIT_AS`` is not enforced on macOS.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from jaxlsp.capture.launch import staging
from jaxlsp.capture.launch.early import EarlyWorker, launch
from jaxlsp.capture.launch.options import DEFAULT_OPTIONS, CaptureOptions, Launch
from jaxlsp.capture.launch.staging import RefusedError, Stage
from jaxlsp.capture.launch.supervise import CaptureOutcome, Pipes, error_result, result_limit, settle, supervise
from jaxlsp.worker import containment

__all__ = ["CaptureOutcome", "capture_sync", "run_capture"]


def working_directory(request: Mapping[str, Any], fallback: str) -> str:
    """Where the worker starts: the workspace root when it exists (the worker may move on)."""
    root = request.get("workspaceRoot")
    return root if isinstance(root, str) and os.path.isdir(root) else fallback


def refused_outcome(
    message: str, python: str, started: float, via: Literal["cold", "spare"] = "cold"
) -> CaptureOutcome:
    return CaptureOutcome(error_result("refused", message), "", "", time.monotonic() - started, python, via)


async def prepare(python: str, stage: Stage | None) -> tuple[Stage, str]:
    """Stage the worker, check the interpreter and make its path absolute (symlinks kept);
    raises :class:`RefusedError`."""
    staged = stage if stage is not None else await asyncio.to_thread(staging.stage)
    resolved = staging.resolve_interpreter(python)
    await asyncio.to_thread(staging.check_interpreter, resolved)
    return staged, resolved


async def run_capture(
    request_without_fd: Mapping[str, Any],
    python: str,
    options: CaptureOptions = DEFAULT_OPTIONS,
    *,
    stage: Stage | None = None,
) -> CaptureOutcome:
    """Capture in a fresh worker process of ``python``; see the module docstring and
    :class:`~jaxlsp.capture.launch.options.CaptureOptions`.

    ``request_without_fd`` is a ``WorkerRequest`` without ``resultFd`` (any given one is replaced).
    ``stage`` overrides the staged worker (tests stage a stand-in).
    """
    started = time.monotonic()
    try:
        staged, python = await prepare(python, stage)
    except RefusedError as exc:
        return refused_outcome(str(exc), python, started)
    return await spawn_cold(request_without_fd, python, staged, options, started)


async def spawn_cold(
    request_without_fd: Mapping[str, Any],
    python: str,
    staged: Stage,
    options: CaptureOptions,
    started: float,
    early: EarlyWorker | None = None,
) -> CaptureOutcome:
    """A fresh worker for the capture, supervised until its end; ``started`` is when the capture
    began (time spent before, waiting for a spare, counts against ``options.timeout``).
    ``early``: a worker the CLI started ahead (capture/launch/early.py), used when it is this one."""
    memory_mb = options.memory_for(request_without_fd)
    request = dict(request_without_fd)
    cwd = working_directory(request, str(staged.path))
    launched = early.take(python, staged, memory_mb, cwd, request) if early is not None else None
    if launched is None:
        try:
            launched = launch(python, staged, memory_mb, cwd)
        except OSError as exc:
            return refused_outcome(f"The Python interpreter {python!r} could not be started: {exc}.", python, started)
    proc = launched.proc
    request["resultFd"] = launched.result_fd
    # Into its own cgroup (where one can be made) before the request is written: the worker runs no
    # user code before it has read the request, so every process that code starts is born inside.
    cgroup = containment.cgroup_create(f"{os.getpid()}-cold-{proc.pid}")
    if cgroup is not None and not containment.cgroup_join(cgroup, proc.pid):
        containment.cgroup_remove(cgroup)
        cgroup = None
    loop = asyncio.get_running_loop()
    writer = asyncio.ensure_future(write_all(loop, launched.in_w, json.dumps(request).encode()))
    return await supervise(
        PopenChild(proc, cgroup),
        Pipes(stdout=launched.out_r, stderr=launched.err_r, result=launched.result_r),
        options,
        Launch(python, "cold", started, options.timeout, memory_mb, result_limit(request)),
        extra_tasks=(writer,),
        workspace=_workspace_of(request),
    )


def _workspace_of(request: Mapping[str, Any]) -> str | None:
    root = request.get("workspaceRoot")
    return root if isinstance(root, str) and root else None


def capture_sync(
    request_without_fd: Mapping[str, Any],
    python: str,
    options: CaptureOptions = DEFAULT_OPTIONS,
    *,
    stage: Stage | None = None,
) -> CaptureOutcome:
    """:func:`run_capture` for callers without an event loop. Ctrl-C kills the worker."""
    done: list[CaptureOutcome] = []

    async def once() -> None:  # never the main task's result (service.trace_once says why)
        done.append(await run_capture(request_without_fd, python, options, stage=stage))

    asyncio.run(once())
    return done[0]


async def write_all(loop: asyncio.AbstractEventLoop, fd: int, data: bytes) -> None:
    """Write ``data`` to a pipe without blocking the loop, then close it; a reader that went away
    (``EPIPE``) is not an error here: its exit tells the story."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                writable: asyncio.Future[None] = loop.create_future()
                loop.add_writer(fd, settle, writable)
                try:
                    await writable
                finally:
                    loop.remove_writer(fd)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        os.close(fd)


def _exit_watcher(pid: int) -> tuple[int, Callable[[], None]] | None:
    """A descriptor that becomes readable when ``pid`` exits, without reaping it: a pidfd (Linux
    >= 5.3) or a kqueue ``NOTE_EXIT`` filter (macOS); None where neither exists."""
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
            return pidfd, functools.partial(os.close, pidfd)
    if sys.platform == "darwin":
        kq = select.kqueue()
        event = select.kevent(
            pid,
            filter=select.KQ_FILTER_PROC,
            flags=select.KQ_EV_ADD | select.KQ_EV_ONESHOT,
            fflags=select.KQ_NOTE_EXIT,
        )
        try:
            kq.control([event], 0, 0)
        except OSError:  # already gone: a descriptor that is readable at once
            kq.close()
            r, w = os.pipe()
            os.close(w)
            return r, functools.partial(os.close, r)
        return kq.fileno(), kq.close
    return None


class PopenChild:
    """A cold worker: exit seen through a pidfd (Linux), kqueue (macOS) or a ``waitid(WNOWAIT)``
    thread, so the leader stays unreaped (its number taken) until its group is killed."""

    def __init__(self, proc: subprocess.Popen[bytes], cgroup: str | None = None) -> None:
        self.proc = proc
        self.pgid = proc.pid
        self.cgroup = cgroup  # killed with the group: what left it (setsid) is still in here

    async def wait_exit(self) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        watcher = _exit_watcher(self.proc.pid)
        if watcher is not None:
            fd, closer = watcher
            loop.add_reader(fd, settle, done)
            try:
                await done
            finally:
                loop.remove_reader(fd)
                closer()
            return
        if hasattr(os, "waitid"):

            def watch() -> None:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(settle, done)

            threading.Thread(target=watch, name=f"jaxlsp-wait-{self.proc.pid}", daemon=True).start()
            await done
            return
        while self.proc.poll() is None:  # last resort: reaps, so the group kill may come late
            await asyncio.sleep(0.01)

    async def kill(self) -> None:
        if self.proc.returncode is None:  # never after reaping: the number may be reused
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, 9)

    async def reap(self) -> int | None:
        delay = 0.0005
        deadline = time.monotonic() + 5
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        if self.proc.returncode is None:
            await asyncio.to_thread(self.proc.wait)
        return self.proc.returncode
