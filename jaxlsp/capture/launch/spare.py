"""Warm spares: a pre-started process per interpreter that has imported jax and forks captures.

A spare is ``python -I -B -c SPARE_BOOTSTRAP STAGE CONFIG`` running
:func:`jaxlsp.worker.process.forkserver.serve`: it imports jax (and flax / equinox when installed)
without initialising any XLA backend, plus the staged worker, then waits on a Unix socket. For
each capture the server creates the result / stdout / stderr pipes, sends their write ends with
the request (``SCM_RIGHTS``), and the spare forks a child that runs the worker's in-process
``capture(request, jax_ready=True)`` in a fresh session and process group, under the memory cap.
A capture therefore pays neither the interpreter start nor the jax import, while every user
import is fresh (the child is a fresh fork of a spare that never imported user code). Deadline,
cancellation, draining and group cleanup are exactly the cold path's (:mod:`.supervise`).

The pool keys spares by interpreter path (as given, never resolved: a venv's ``bin/python`` is a
symlink to its base interpreter) and by the staged worker's digest. A spare that dies is replaced
(in the background when it had been ready; lazily otherwise); a capture that finds no ready spare
runs cold. The server starts spares only for trusted workspaces: :meth:`SparePool.start` is
explicit, and :meth:`SparePool.capture` never starts one unless ``warm=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from jaxlsp.capture.environment import allowed_env
from jaxlsp.capture.launch import phases, staging
from jaxlsp.capture.launch.client import prepare, refused_outcome, spawn_cold, working_directory
from jaxlsp.capture.launch.early import EarlyWorker
from jaxlsp.capture.launch.options import DEFAULT_OPTIONS, CaptureOptions, Launch
from jaxlsp.capture.launch.staging import RefusedError, Stage
from jaxlsp.capture.launch.supervise import (
    CaptureOutcome,
    LogBuffer,
    PipeReader,
    Pipes,
    group_alive,
    killpg,
    result_limit,
    settle,
    supervise,
)
from jaxlsp.worker.protocol import NO_PRIMES

log = logging.getLogger(__name__)

DEFAULT_PRELOAD: tuple[str, ...] = ("jax", "jax.numpy", "flax.linen", "flax.nnx", "equinox")
REQUIRED: tuple[str, ...] = ("jax",)
START_TIMEOUT = 120.0
RETRY_FAILED_AFTER = 60.0  # seconds before a spare that failed to start is tried again

SPARE_BOOTSTRAP = staging.SPARE_BOOTSTRAP
#: calls of JAX's functions one spare is sent to prime, at most (worker/reuse/priming.py); each is made
#: once, in the spare, in 0.1-0.5 ms
MAX_PRIMED = 8192


class SpareUnavailable(Exception):
    """The spare cannot take this capture (not ready, died before forking): run it cold."""


@dataclass
class _Job:
    started: asyncio.Future[int]
    exited: asyncio.Future[int]
    abandoned: bool = False


@dataclass
class SpareProcess:
    """The server's side of one warm spare: the process, its socket and the captures it runs.
    The other side, in the user's interpreter, is :class:`jaxlsp.worker.process.forkserver.ForkServer`."""

    python: str
    stage: Stage
    preload: Sequence[str]
    required: Sequence[str]
    proc: subprocess.Popen[bytes] | None = None
    sock: socket.socket | None = None
    ready: asyncio.Future[dict[str, Any]] | None = None
    jobs: dict[int, _Job] = field(default_factory=dict)
    stderr: LogBuffer = field(default_factory=lambda: LogBuffer(16 * 1024, 16 * 1024))
    dead: bool = False
    failed_at: float | None = None
    tasks: set[asyncio.Future[Any]] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _stderr_reader: PipeReader | None = None
    on_death: Callable[[SpareProcess], None] | None = None
    # Installed modules learned from the captures' ``imported`` lists (forkserver.py): sent to the
    # spare to preload once each; ``refused`` are those that made some spare unsafe to fork (kept
    # by the pool for the interpreter, so its next spare is never sent them again).
    sent: set[str] = field(default_factory=set)
    learned: list[str] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    # The calls of JAX's functions the captures missed JAX's caches with (``primes``), sent to the
    # spare to make once each before its next fork (worker/reuse/priming.py); by their JSON spelling.
    primed: set[str] = field(default_factory=set)
    calls_primed: int = 0  # the calls the spare made (its ``primed`` events)
    # The files (and their folders) of every module the spare has loaded, as it saw them: path ->
    # [mtime_ns, size, inode] (its ``ready`` and ``preloaded`` events). Each capture compares them
    # with the disk while it runs; a change retires the spare (:meth:`changed_file`).
    files: dict[str, list[int]] = field(default_factory=dict)
    stale: str | None = None  # the file whose change retired this spare

    # -- life -----------------------------------------------------------------------------------------
    def launch(self) -> None:
        loop = asyncio.get_running_loop()
        self.ready = loop.create_future()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        err_r, err_w = os.pipe()
        config = {
            "fd": theirs.fileno(),
            "worker": self.stage.worker_module,
            "preload": list(self.preload),
            "required": list(self.required),
        }
        try:
            self.proc = subprocess.Popen(
                [self.python, "-I", "-B", "-c", SPARE_BOOTSTRAP, str(self.stage.path), json.dumps(config)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err_w,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                close_fds=True,
                cwd=str(self.stage.path),
                env=allowed_env.base_environment(),
            )
        except OSError as exc:
            ours.close()
            os.close(err_r)
            self._fail(f"could not start {self.python!r}: {exc}")
            return
        finally:
            theirs.close()
            os.close(err_w)
        self.sock = ours
        ours.setblocking(False)
        self._stderr_reader = PipeReader(loop, err_r, self.stderr.feed)
        task = asyncio.ensure_future(self._listen())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _fail(self, message: str) -> None:
        self.dead = True
        self.failed_at = time.monotonic()
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(SpareUnavailable(message))
            self.ready.exception()  # retrieved: nobody may be waiting

    @property
    def is_ready(self) -> bool:
        return not self.dead and self.ready is not None and self.ready.done() and not self.ready.exception()

    async def _listen(self) -> None:
        assert self.sock is not None
        loop = asyncio.get_running_loop()
        buffer = b""
        try:
            while True:
                data = await loop.sock_recv(self.sock, 1 << 16)
                if not data:
                    break
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self._on_event(json.loads(line))
        except (OSError, ValueError) as exc:
            log.warning("warm spare for %s: %s", self.python, exc)
        finally:
            self._on_death()

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        job = self.jobs.get(event.get("id", -1))
        if kind in ("ready", "preloaded") and isinstance(event.get("files"), dict):
            self.files.update(event.pop("files"))
        if kind == "ready" and self.ready is not None and not self.ready.done():
            self.ready.set_result(event)
        elif kind == "failed":
            log.warning("warm spare for %s failed to start: %s", self.python, event.get("message"))
            self._fail(str(event.get("message")))
        elif kind == "started" and job is not None:
            job.started.set_result(int(event["pid"]))
            if job.abandoned:
                self.spawn_task(self.kill(int(event["pid"])))
        elif kind == "error" and job is not None:
            job.started.set_exception(SpareUnavailable(str(event.get("message"))))
        elif kind == "exited" and job is not None:
            if not job.exited.done():
                job.exited.set_result(int(event["status"]))
            self.jobs.pop(event["id"], None)
        elif kind == "primed":
            self.calls_primed += int(event.get("calls") or 0)
            log.info(
                "warm spare for %s primed %s calls in %.3f s", self.python, event.get("calls"), event.get("seconds", 0)
            )
        elif kind == "preloaded":
            self.learned.extend(str(m) for m in event.get("modules") or [])
            log.info("warm spare for %s preloaded %s", self.python, ", ".join(event.get("modules") or []))
        elif kind == "retiring":
            self.refused.update(str(m) for m in event.get("modules") or [])
            log.warning("warm spare for %s retires: %s", self.python, event.get("message"))

    def _on_death(self) -> None:
        was_ready = self.is_ready
        self.dead = True
        tail = self.stderr.text().strip()
        self._fail(f"the warm spare exited during start-up{': ' + tail[-2000:] if tail else ''}")
        for job in self.jobs.values():
            for fut in (job.started, job.exited):
                if not fut.done():
                    fut.set_exception(SpareUnavailable("the warm spare died"))
                    fut.exception()
        self.jobs.clear()
        if self.proc is not None and self.proc.poll() is None:
            killpg(self.proc.pid)  # it is our child and unreaped: the number is still its own
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1)
        if was_ready:
            log.warning("warm spare for %s died", self.python)
            if self.on_death is not None:
                self.on_death(self)

    def spawn_task(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def close(self) -> None:
        self.dead = True
        if self.sock is not None:
            self.sock.close()  # EOF: the spare kills its children's groups, reaps them and exits
        proc = self.proc
        if proc is not None:
            deadline = time.monotonic() + 2
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            if proc.returncode is None:
                killpg(proc.pid)
                await asyncio.to_thread(proc.wait)
        for task in list(self.tasks):
            task.cancel()
        if self._stderr_reader is not None:
            self._stderr_reader.close()

    # -- the wire -------------------------------------------------------------------------------------
    async def send(self, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        if self.sock is None or self.dead:
            raise SpareUnavailable("the warm spare is not running")
        loop = asyncio.get_running_loop()
        data = json.dumps(message).encode() + b"\n"
        async with self._send_lock:
            try:
                while True:
                    try:
                        sent = socket.send_fds(self.sock, [data], list(fds)) if fds else self.sock.send(data)
                        break
                    except BlockingIOError:
                        writable: asyncio.Future[None] = loop.create_future()
                        loop.add_writer(self.sock, settle, writable)
                        try:
                            await writable
                        finally:
                            loop.remove_writer(self.sock)
                if sent < len(data):
                    await loop.sock_sendall(self.sock, data[sent:])
            except OSError as exc:
                raise SpareUnavailable(f"the warm spare stopped listening: {exc}") from exc

    async def kill(self, pid: int) -> None:
        try:
            await self.send({"op": "kill", "pid": pid})
        except SpareUnavailable:
            killpg(pid)  # orphaned: nobody reaps it but init; the number is very unlikely reused yet

    def learn(self, modules: Any, states: Any = None) -> None:
        """A capture imported these installed modules: have the spare preload the new ones.
        ``states`` are their digests as that capture, which imported them fresh, saw them: the
        spare keeps none whose own import holds something else (forkserver.py ``_preload``)."""
        if self.dead or not isinstance(modules, list):
            return
        seen = states if isinstance(states, dict) else {}
        # only those the capture digested: a module that cannot be compared is not preloaded
        new = [
            m
            for m in modules
            if isinstance(m, str) and isinstance(seen.get(m), str) and m not in self.sent and m not in self.refused
        ]
        if new:
            self.sent.update(new)
            # every digest the capture made: a named module may import others it reported
            digests = {m: v for m, v in seen.items() if isinstance(m, str) and isinstance(v, str)}
            self.spawn_task(self._preload(new, digests))

    async def _preload(self, modules: list[str], states: dict[str, str]) -> None:
        message = {"op": "preload", "modules": modules, "states": states, "refused": sorted(self.refused)}
        with contextlib.suppress(SpareUnavailable):
            await self.send(message)

    def changed_file(self, files: Mapping[str, list[int]]) -> str | None:
        """The first of the spare's loaded files (or their folders) that is not as the spare saw it
        when it imported them (modified, replaced, removed, a file added beside it), or None.
        About 1,400 ``stat`` calls with jax, flax and equinox: 3-8 ms, run beside each capture."""
        for path, seen in files.items():
            try:
                st = os.stat(path)
            except OSError:
                return path
            if [st.st_mtime_ns, st.st_size, st.st_ino] != seen:
                return path
        return None

    def retire_stale(self, path: str) -> None:
        """A file the spare had loaded changed on disk: its forks would run the old code (or keep
        state read from the old files), so it is replaced by a spare that imports them anew."""
        if self.dead:
            return
        self.stale = path
        log.warning("warm spare for %s retires: %s changed on disk since it was imported", self.python, path)
        self.dead = True  # no further captures
        if self.on_death is not None:
            self.on_death(self)  # the pool closes it and starts its successor now
        else:
            self.spawn_task(self.close())

    def learn_primes(self, entries: Any) -> None:
        """A capture missed JAX's caches with these calls: have the spare make the new ones."""
        if self.dead or not isinstance(entries, list) or NO_PRIMES in self.refused:
            return
        new = []
        for entry in entries:
            if len(self.primed) >= MAX_PRIMED:
                break
            key = json.dumps(entry, separators=(",", ":"))
            if key not in self.primed:
                self.primed.add(key)
                new.append(entry)
        if new:
            self.spawn_task(self._prime(new))

    async def _prime(self, entries: list[Any]) -> None:
        with contextlib.suppress(SpareUnavailable):
            await self.send({"op": "prime", "entries": entries})

    # -- one capture ----------------------------------------------------------------------------------
    async def run(
        self, request_without_fd: Mapping[str, Any], options: CaptureOptions, started: float
    ) -> CaptureOutcome:
        memory_mb = options.memory_for(request_without_fd)
        loop = asyncio.get_running_loop()
        ident = next(self._ids)
        job = _Job(loop.create_future(), loop.create_future())
        request = dict(request_without_fd)
        request["resultFd"] = -1  # the child puts its own number here
        result_r, result_w = os.pipe()
        _widen(result_w)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        message = {
            "op": "capture",
            "id": ident,
            "request": request,
            "memory": memory_mb * 1024 * 1024 if memory_mb else 0,
            "cwd": working_directory(request, str(self.stage.path)),
        }
        if self.refused:  # not to be digested again (forkserver.py module_state)
            message["refused"] = sorted(self.refused)
        self.jobs[ident] = job
        try:
            try:
                await self.send(message, [result_w, out_w, err_w])
            finally:
                for fd in (result_w, out_w, err_w):
                    os.close(fd)
            pid = await job.started
            phases.mark("fork")
            # Whether what the spare imported is still what is on disk, beside the capture (it
            # started after the request was sent: any change made before it is seen).
            check = asyncio.ensure_future(asyncio.to_thread(self.changed_file, dict(self.files)))
        except BaseException as exc:
            for fd in (result_r, out_r, err_r):
                os.close(fd)
            job.abandoned = True  # a fork that still happens is killed as soon as it is announced
            if job.started.done() and not job.started.cancelled() and not job.started.exception():
                await self.kill(job.started.result())
            if not isinstance(exc, SpareUnavailable | asyncio.CancelledError):
                raise SpareUnavailable(str(exc)) from exc
            raise
        try:
            outcome = await supervise(
                ForkedCapture(self, pid, job),
                Pipes(stdout=out_r, stderr=err_r, result=result_r),
                options,
                Launch(self.python, "spare", started, options.timeout, memory_mb, result_limit(request)),
                workspace=request.get("workspaceRoot") or None,
            )
        except BaseException:
            check.cancel()
            raise
        changed = await check
        result = cast(dict[str, Any], outcome.result)
        imported, states = result.pop("imported", None), result.pop("importedState", None)
        if changed is not None:
            self.retire_stale(changed)
            raise SpareUnavailable(f"{changed} changed on disk since the warm spare imported it")
        self.learn(imported, states)
        self.learn_primes(result.pop("primes", None))
        return outcome


RESULT_PIPE_BYTES = 1 << 20


def _widen(fd: int) -> None:
    """A 1 MiB result pipe (Linux; the default is 64 KiB): a graph's few hundred kilobytes are then
    written at once and read in a few large reads, not sixteen turns of the event loop."""
    try:
        import fcntl
    except ImportError:  # not POSIX: refused before any capture anyway
        return
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setsize, RESULT_PIPE_BYTES)


class ForkedCapture:
    """A forked capture: the spare sees its exit, kills its group and reaps it."""

    def __init__(self, spare: SpareProcess, pid: int, job: _Job) -> None:
        self.spare, self.pgid, self.job = spare, pid, job

    async def wait_exit(self) -> None:
        try:
            await asyncio.shield(self.job.exited)
        except SpareUnavailable:
            # The spare died: the orphan is init's now. Its end is its group emptying.
            while group_alive(self.pgid):
                await asyncio.sleep(0.02)

    async def kill(self) -> None:
        if not self.job.exited.done():
            await self.spare.kill(self.pgid)

    async def reap(self) -> int | None:
        fut = self.job.exited
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            return os.waitstatus_to_exitcode(fut.result())
        return None


class SparePool:
    """Warm spares by interpreter; see the module docstring.

    ``stage`` overrides the staged worker (tests stage a stand-in); ``preload`` names the modules a
    spare imports (those in ``required`` must import or the spare is not used).
    """

    def __init__(
        self,
        *,
        stage: Stage | None = None,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        required: Sequence[str] = REQUIRED,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.stage = stage
        self.preload = tuple(preload)
        self.required = tuple(required)
        self.start_timeout = start_timeout
        self._spares: dict[str, SpareProcess] = {}
        self._refused: dict[str, set[str]] = {}  # interpreter -> modules that made a spare unsafe to fork
        self._closed = False

    @staticmethod
    def _key(python: str) -> str:
        try:
            return staging.resolve_interpreter(python)
        except RefusedError:
            return python

    async def start(self, python: str) -> bool:
        """Start (or keep) the spare for ``python`` and wait until it is ready; True when it is.

        Refusals (an interpreter too old, Windows) and start-up failures (no jax, a backend
        initialised at import) return False; :meth:`info` says why.
        """
        try:
            staged, python = await prepare(python, self.stage)
        except RefusedError as exc:
            log.info("no warm spare for %s: %s", python, exc)
            return False
        spare = self._ensure(python, staged, force=True)
        return await self._await_ready(spare, self.start_timeout)

    def info(self, python: str) -> dict[str, Any] | None:
        """The spare's ``ready`` event (pid, python version, preloaded modules...), or None."""
        spare = self._spares.get(self._key(python))
        if spare is None or not spare.is_ready or spare.ready is None:
            return None
        return dict(spare.ready.result())

    def learned(self, python: str) -> list[str]:
        """The modules the spare for ``python`` preloaded since it started, learned from captures."""
        spare = self._spares.get(self._key(python))
        return [] if spare is None or spare.dead else list(spare.learned)

    def refused(self, python: str) -> list[str]:
        """The modules no spare for ``python`` preloads any more (their preload made forking
        unsafe, or their state differed from a fresh import's)."""
        return sorted(self._refused.get(self._key(python), ()))

    def primed(self, python: str) -> int:
        """The calls of JAX's functions the spare for ``python`` made to fill JAX's caches, learned
        from captures (worker/reuse/priming.py)."""
        spare = self._spares.get(self._key(python))
        return 0 if spare is None or spare.dead else spare.calls_primed

    def _ensure(self, python: str, staged: Stage, *, force: bool) -> SpareProcess:
        if self._closed:
            raise RuntimeError("the spare pool is closed")
        key = self._key(python)
        spare = self._spares.get(key)
        if spare is not None and spare.stage == staged and not spare.dead:
            return spare
        failed_at = spare.failed_at if spare is not None else None
        recently_failed = failed_at is not None and time.monotonic() - failed_at < RETRY_FAILED_AFTER
        if spare is not None and recently_failed and spare.stage == staged and not force:
            return spare
        if spare is not None:
            spare.spawn_task(spare.close())
        refused = self._refused.setdefault(key, set())
        spare = SpareProcess(python, staged, self.preload, self.required, on_death=self._replace, refused=refused)
        self._spares[key] = spare
        spare.launch()
        return spare

    def _replace(self, dead: SpareProcess) -> None:
        """A spare that had been ready died: start its successor now, for the next capture."""
        if not self._closed and self._spares.get(self._key(dead.python)) is dead:
            log.info("replacing the warm spare for %s", dead.python)
            self._ensure(dead.python, dead.stage, force=True)

    async def _await_ready(self, spare: SpareProcess, timeout: float) -> bool:
        if spare.ready is None:
            return False
        try:
            await asyncio.wait_for(asyncio.shield(spare.ready), timeout=max(timeout, 0.001))
        except (SpareUnavailable, TimeoutError):
            return False
        return spare.is_ready

    async def capture(
        self,
        request_without_fd: Mapping[str, Any],
        python: str,
        options: CaptureOptions = DEFAULT_OPTIONS,
        *,
        warm: bool = True,
        early: EarlyWorker | None = None,
    ) -> CaptureOutcome:
        """Like :func:`jaxlsp.capture.launch.client.run_capture`, through the spare when one is ready
        (cold: through ``early``, the CLI's early worker, when it fits).

        With ``warm`` (the default) a missing or dead spare is (re)started in the background for
        the next capture; a spare still starting is waited for (it is at least as fast as a cold
        start); otherwise, or when the spare fails, the capture runs cold.
        """
        started = time.monotonic()
        try:
            staged, python = await prepare(python, self.stage)
        except RefusedError as exc:
            return refused_outcome(str(exc), python, started)
        spare = self._spares.get(self._key(python))
        if warm and not self._closed:
            was_dead = spare is None or spare.dead or spare.stage != staged
            spare = self._ensure(python, staged, force=False)
            if was_dead and not spare.is_ready:
                spare = None  # just (re)started: it needs as long as a cold run; go cold now
        if spare is not None and not spare.dead and spare.stage == staged:
            if not spare.is_ready:
                await self._await_ready(spare, options.timeout - (time.monotonic() - started))
            if spare.is_ready:
                try:
                    return await spare.run(request_without_fd, options, started)
                except SpareUnavailable as exc:
                    log.info("warm spare unavailable (%s): capturing cold", exc)
        return await spawn_cold(request_without_fd, python, staged, options, started, early)

    async def close(self) -> None:
        """Stop every spare (and with them any capture they are running)."""
        self._closed = True
        spares, self._spares = list(self._spares.values()), {}
        await asyncio.gather(*(spare.close() for spare in spares), return_exceptions=True)


__all__ = ["DEFAULT_PRELOAD", "SPARE_BOOTSTRAP", "SparePool", "SpareUnavailable", "staging"]
