"""The warm spare's loop: runs in the user's interpreter (stdlib only, Python >= 3.10).

Started by :mod:`jaxlsp.capture.launch.spare` as ``python -I -B -c "...serve()" STAGE CONFIG`` with one
end of a Unix stream socket (fd named in CONFIG). It imports jax (and flax / equinox when
installed) WITHOUT initialising any XLA backend, plus the worker module, then waits. For each
capture it forks one child that runs the worker's in-process ``capture(request, jax_ready=True)``
in its own session and process group, with its own stdout / stderr / result pipes (received from
the server as file descriptors) and memory cap, and writes the result to the result pipe.

Wire (newline-delimited JSON both ways):

- server -> spare: ``{"op": "capture", "id", "request", "memory", "cwd"}`` carrying three fds
  (result, stdout, stderr write ends) in the same ``sendmsg``; ``{"op": "kill", "pid"}``;
  ``{"op": "preload", "modules", "states", "refused"}`` (the modules' :func:`module_state`
  digests as the capture that imported them fresh saw them); ``{"op": "prime", "entries"}``
  (calls of JAX's own functions that captures missed JAX's caches with: worker/reuse/priming.py).
- spare -> server: ``{"event": "ready", ...}`` or ``{"event": "failed", "message"}`` once;
  ``{"event": "started", "id", "pid"}`` (or ``"error"``); ``{"event": "exited", "id", "pid",
  "status"}`` (a raw wait status) after the spare killed the child's whole group and reaped it;
  ``{"event": "preloaded", "modules", "seconds", "files"}`` (``files``, in ``ready`` too: each
  loaded module's file and folder with its mtime, size and inode, for the server to compare with
  the disk), ``{"event": "primed", "calls", "seconds"}``,
  or ``{"event": "retiring", "modules", "message"}`` when a preload or priming made forking unsafe
  or took too long, or a preloaded module's state differed from a fresh import's (the spare then forks no more
  and exits once its running captures have ended; the server starts another, never sending it
  that batch again).

The spare never runs user code itself: every user import happens in a fresh fork. What it learns
to preload are the installed libraries (site-packages, the standard library) that earlier
captures imported, never a workspace file: each capture's result lists them (``imported``), the
server sends the new ones back (``preload``), and later forks start with them imported, so a
capture pays only for the user's own modules.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import selectors
import signal
import socket
import sys
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import FrameType, FunctionType
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict, cast

from jaxlsp.worker.containment import (
    cgroup_create,
    cgroup_join,
    cgroup_kill,
    cgroup_sweep,
    kill_orphans,
    set_dumpable,
    set_subreaper,
)
from jaxlsp.worker.protocol import NO_PRIMES

if TYPE_CHECKING:
    from jaxlsp.worker.protocol import WorkerRequest, WorkerResult

FDS_PER_CAPTURE = 3
MAX_LEARNED = 4000  # module names one capture may report (a hostile one could list anything)
PRELOAD_LIMIT = 20.0  # seconds the spare may spend importing what captures imported, each time
STANDBY_ENV = "JAXLSP_CAPTURE_STANDBY"  # "0": no child forked ahead of the next capture
STANDBY = os.environ.get(STANDBY_ENV) != "0"
STANDBY_NAME = "jaxlsp-standby"  # the waiting standby's process name (``comm``)
#: in a ``retiring`` event's modules: priming made a spare unsafe (no module is named so)
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _preload(modules: list[str], required: list[str]) -> tuple[list[str], list[str]]:
    import importlib

    loaded, missing = [], []
    for name in modules:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception as exc:
            if name in required:
                raise
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
    return loaded, missing


def _unlike(brought: dict[str, list[str]], states: object, refused: object) -> list[str]:
    """The named modules, and the modules with a file they brought, whose :func:`module_state` here
    is not the one a fresh import gave (``states``), has none there, or is ``refused``."""
    if not isinstance(states, dict):
        states = {}
    bad = set(refused) if isinstance(refused, list) else set()
    out: list[str] = []
    for name, modules in brought.items():
        differ = [
            m
            for m in modules
            if isinstance(getattr(sys.modules.get(m), "__file__", None), str)
            and (m in bad or module_state(sys.modules.get(m)) != states.get(m))
        ]
        if differ:
            out.extend(m for m in dict.fromkeys([name, *differ]) if m not in out)
    return out


def _backends_initialised() -> bool:
    from jaxlsp.worker.tracing import jaxcompat

    return jaxcompat.backends_initialized(unknown=False)  # without the helper: trust the import alone


class CaptureMessage(TypedDict):
    """The server's ``capture`` op (capture/launch/spare.py): a request and the child's limits."""

    op: str
    id: int
    request: WorkerRequest  # without its resultFd: the child's own pipe goes there
    memory: NotRequired[int]  # the child's memory cap in bytes (0: none)
    cwd: NotRequired[str]
    refused: NotRequired[list[str]]  # modules never to be digested again (module_state)


class _Capture(Protocol):
    """The worker's in-process ``capture`` (worker/process/main.py)."""

    def __call__(self, request: WorkerRequest, *, jax_ready: bool = ...) -> WorkerResult: ...


class ForkServer:
    """The warm spare's loop, in the user's interpreter: forks one child per capture request. The
    server's side is :class:`jaxlsp.capture.launch.spare.SpareProcess`."""

    def __init__(self, sock: socket.socket, capture: _Capture | None) -> None:
        self.sock = sock
        self.capture = capture  # None until :func:`serve` imported the worker
        self.warm: Callable[[], object] | None = None  # the worker's ``warm``, run again after a preload
        # the worker's ``prime``: JAX's caches filled before the next fork
        self.prime: Callable[[object, Callable[[], bool] | None], int] | None = None
        self.exiting: Callable[[], None] | None = None  # the worker's ``exiting``: a child exits after its capture
        self.fds: deque[int] = deque()
        self.buffer = b""
        self.children: dict[int, int] = {}  # pid -> capture id
        self.cgroups: dict[int, str] = {}  # pid -> the capture's cgroup, where one could be made
        self.retiring = False  # a preload made forking unsafe: no more forks, exit when idle
        # A child forked ahead of the next capture, set up and waiting for its request (pid, the
        # socket it waits on, its cgroup): the fork, the cgroup's join and the rest of a child's
        # set-up (20 ms here, 12 of them the kernel's cgroup move) are then off the capture's path.
        self.standby: tuple[int, socket.socket, str | None] | None = None
        self.no_standby = not STANDBY
        self._standbys = 0
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.selector = selectors.DefaultSelector()

    def send(self, message: Mapping[str, object]) -> None:
        with contextlib.suppress(OSError):  # the server is gone: the loop sees EOF and cleans up
            self.sock.sendall(json.dumps(message).encode() + b"\n")

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w)
        self.selector.register(self.sock, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        try:
            while True:
                self._make_standby()  # the next capture's child, ready before it is asked for
                for key, _ in self.selector.select():
                    if key.fileobj is self.sock:
                        if not self._receive():
                            return
                        if self.retiring and not self.children:
                            return
                    else:
                        try:
                            while os.read(self.wake_r, 512):
                                pass
                        except BlockingIOError:
                            pass
                self._reap()
                if self.retiring and not self.children:
                    return
        finally:
            self._drop_standby()
            for pid in list(self.children):
                _killpg(pid)
            for path in self.cgroups.values():
                cgroup_kill(path)
            kill_orphans(set(self.children))
            for pid in list(self.children):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)

    def _receive(self) -> bool:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 64)
        except InterruptedError:
            return True
        except OSError:
            return False
        self.fds.extend(fds)
        if not data:
            return False
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            message: dict[str, object] = json.loads(line)  # the server's op (capture/launch/spare.py)
            if message.get("op") == "capture":
                self._fork(cast(CaptureMessage, message))
            elif message.get("op") == "kill":
                pid = int(cast(int, message["pid"]))
                if pid in self.children:  # never a reaped (hence reusable) pid
                    _killpg(pid)
            elif message.get("op") == "preload" and not self.retiring:
                self._preload(message.get("modules"), message.get("states"), message.get("refused"))
            elif message.get("op") == "prime" and not self.retiring:
                self._prime(message.get("entries"))
        return True

    def _preload(self, modules: object, states: object = None, refused: object = None) -> None:
        """Import the installed modules earlier captures imported, in their order, within
        :data:`PRELOAD_LIMIT` seconds; retire if that started an XLA backend or a thread (a fork
        would then hang or inherit a held lock) or ran out of time (a module is half imported).

        ``states`` are the modules' :func:`module_state` digests as the capture that imported
        them fresh saw them. A module imported here (named, or imported by a named one) whose
        digest differs kept something of where it was imported (this process's working folder,
        ``sys.path``, environment...): a fork would start with state a cold capture never has, so
        the spare retires and names it, with the module whose import brought it, never to be
        preloaded again for this interpreter. So does one with no digest to compare, or one of
        ``refused`` (an earlier spare's)."""
        import importlib

        started = time.monotonic()
        loaded: list[str] = []
        brought: dict[str, list[str]] = {}  # a named module -> every module its import loaded

        def work(expired: list[bool]) -> None:
            for name in modules if isinstance(modules, list) else []:
                if expired:
                    break
                if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name) or name in sys.modules:
                    continue
                had = set(sys.modules)
                try:
                    importlib.import_module(name)
                    loaded.append(name)
                except BaseException:  # a library's import failing here is not our failure
                    continue
                finally:
                    brought[name] = [m for m in list(sys.modules) if m not in had]

        why = self._guarded(work, "preloading")
        unlike = _unlike(brought, states, refused)
        if unlike and not why:
            why = "a preloaded module's state differs from a fresh import's: " + ", ".join(unlike[:8])
        why = why or self._warm_again("preloading")
        if loaded:
            self._drop_standby()  # forked before these imports: the next one has them
        if why:
            # every module of the batch (the one that did it is among them), or those whose state
            # differed: the next spare is never sent them
            batch = [m for m in modules if isinstance(m, str)] if isinstance(modules, list) else []
            self._retire(unlike or batch, why)
            return
        self.send(
            {
                "event": "preloaded",
                "modules": loaded,
                "seconds": time.monotonic() - started,
                "files": file_signatures(m for names in brought.values() for m in names),
            }
        )

    def _prime(self, entries: object) -> None:
        """Make the calls of JAX's own functions that earlier captures missed JAX's caches with
        (worker/reuse/priming.py), under the same guard as a preload; a spare that priming made unsafe
        retires, and no spare of this interpreter is sent primes again (:data:`NO_PRIMES`)."""
        if self.prime is None or not isinstance(entries, list):
            return
        started = time.monotonic()
        modules = len(sys.modules)
        made: list[int] = []
        prime = self.prime

        def work(expired: list[bool]) -> None:
            made.append(prime(entries, lambda: bool(expired) or self._waiting()))

        why = self._guarded(work, "priming")
        if not why and len(sys.modules) != modules:  # a JAX module priming imported
            why = self._warm_again("priming")
        if sum(made):
            self._drop_standby()  # forked before these caches were filled: the next one has them
        if why:
            self._retire([NO_PRIMES], why)
            return
        self.send({"event": "primed", "calls": sum(made), "seconds": time.monotonic() - started})

    def _waiting(self) -> bool:
        """A message from the server is waiting (a capture, most often): priming, which only ever
        saves time, stops for it rather than hold it up (an edit's capture waited up to 12 s
        behind the primes of a 50,000-equation trace); the calls left unmade are not made."""
        if self.buffer.strip():
            return True
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return bool(readable)

    def _guarded(self, work: Callable[[list[bool]], None], what: str) -> str:
        """Run ``work(expired)`` within :data:`PRELOAD_LIMIT` seconds (``expired`` turns true at the
        limit, and a TimeoutError is raised where the work is); why forking is unsafe after it,
        or ''."""
        import threading

        threads = threading.active_count()
        expired: list[bool] = []

        def on_alarm(signum: int, frame: FrameType | None) -> None:
            expired.append(True)
            raise TimeoutError(f"{what} took too long")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, PRELOAD_LIMIT)
        try:
            work(expired)
        except TimeoutError:
            expired.append(True)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if expired:
            return f"{what} took over {PRELOAD_LIMIT:.0f} s"
        if _backends_initialised():
            return f"an XLA backend started while {what}"
        if threading.active_count() > threads:
            return f"a thread started while {what}"
        return ""

    def _warm_again(self, what: str) -> str:
        """The worker's warm-up again: what it precomputes over the loaded modules covers new ones."""
        try:
            if self.warm is not None:
                self.warm()
        except Exception as exc:
            return f"the worker's warm-up failed after {what}: {type(exc).__name__}: {exc}"
        return ""

    def _retire(self, batch: list[str], why: str) -> None:
        self.retiring = True
        self._drop_standby()
        self.send({"event": "retiring", "modules": batch, "message": why})

    def _reap(self) -> None:
        while self.children:
            if hasattr(os, "waitid"):
                try:
                    # Look without reaping first: the group is killed while its leader's pid is
                    # still taken, so the kill can never reach an unrelated process that reused it.
                    info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    return
                if info is None or info.si_pid == 0:
                    return
                pid = info.si_pid
                _killpg(pid)
                self._contain(pid)
                _, status = os.waitpid(pid, 0)
            else:  # macOS has no waitid: reap, then kill what is left of the group at once
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    return
                if pid == 0:
                    return
                _killpg(pid)
                self._contain(pid)
            if self.standby is not None and pid == self.standby[0]:  # died waiting (the OOM killer)
                self.standby[1].close()
                cgroup_kill(self.standby[2])
                self.standby = None
            ident = self.children.pop(pid, None)
            if ident is not None:
                self.send({"event": "exited", "id": ident, "pid": pid, "status": status})

    def _contain(self, pid: int) -> None:
        """A capture's leader exited: kill what it left behind outside its group (its cgroup,
        and the orphans re-parented to us) before its exit is announced."""
        if pid not in self.children:
            return  # an orphan of an earlier capture, being reaped
        cgroup_kill(self.cgroups.pop(pid, None))
        # Every other child of ours is either a running capture's leader or an orphan: a running
        # capture's orphans go to its own leader (a subreaper too), so these are the ended one's.
        kill_orphans(set(self.children) | ({self.standby[0]} if self.standby is not None else set()))

    # -- one capture ---------------------------------------------------------------------------------
    def _fork(self, message: CaptureMessage) -> None:
        ident = message["id"]
        fds = [self.fds.popleft() for _ in range(min(FDS_PER_CAPTURE, len(self.fds)))]
        if self.retiring:
            for fd in fds:
                os.close(fd)
            self.send({"event": "error", "id": ident, "message": "the warm spare is retiring"})
            return
        if len(fds) != FDS_PER_CAPTURE:
            for fd in fds:
                os.close(fd)
            self.send({"event": "error", "id": ident, "message": "the capture's pipes did not arrive"})
            return
        if self._hand_to_standby(message, fds):
            return
        sys.stdout.flush()
        sys.stderr.flush()
        cgroup = cgroup_create(f"{os.getpid()}-{ident}")
        try:
            with warnings.catch_warnings():
                # Python >= 3.12 warns when forking a multi-threaded process; the only threads here
                # are native pools (OpenBLAS) that handle fork themselves.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            cgroup_kill(cgroup)
            self.send({"event": "error", "id": ident, "message": f"fork failed: {exc}"})
            return
        if pid == 0:
            self._child(message, fds, cgroup)  # never returns
        for fd in fds:
            os.close(fd)
        self.children[pid] = ident
        if cgroup is not None:
            self.cgroups[pid] = cgroup
        self.send({"event": "started", "id": ident, "pid": pid})

    # -- the standby ----------------------------------------------------------------------------------
    def _make_standby(self) -> None:
        """Fork the next capture's child now: it sets itself up (cgroup, session, subreaper) and
        waits for its request on a socket of its own (:meth:`_standby_child`)."""
        if self.standby is not None or self.retiring or self.no_standby:
            return
        self._standbys += 1
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cgroup = cgroup_create(f"{os.getpid()}-s{self._standbys}")
        sys.stdout.flush()
        sys.stderr.flush()
        name = _process_name(STANDBY_NAME)  # born with it (``ps``, tests): the spare's back below
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # as in _fork
                pid = os.fork()
        except OSError:
            if name is not None:
                _process_name(name)
            ours.close()
            theirs.close()
            cgroup_kill(cgroup)
            self.no_standby = True  # not tried again by this spare: captures fork as they come
            return
        if pid == 0:
            ours.close()
            self._standby_child(theirs, cgroup, name)  # never returns
        if name is not None:
            _process_name(name)
        theirs.close()
        self.standby = (pid, ours, cgroup)

    def _drop_standby(self) -> None:
        if self.standby is None:
            return
        pid, sock, cgroup = self.standby
        self.standby = None
        sock.close()
        # The process itself, not its group: it may not have made its own session yet (and has
        # started nothing); unreaped, its pid is still its own.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
        cgroup_kill(cgroup)

    def _hand_to_standby(self, message: CaptureMessage, fds: list[int]) -> bool:
        """Give the capture to the standby (its request and pipes over its socket); False when
        there is none or it is gone (then the capture is forked as it comes)."""
        if self.standby is None:
            return False
        pid, sock, cgroup = self.standby
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        try:
            sent = socket.send_fds(sock, [data], fds)
            if sent < len(data):  # (never an empty send: the standby may have read all and closed)
                sock.sendall(data[sent:])
        except OSError:
            self._drop_standby()
            return False
        self.standby = None
        sock.close()
        for fd in fds:
            os.close(fd)
        self.children[pid] = message["id"]
        if cgroup is not None:
            self.cgroups[pid] = cgroup
        self.send({"event": "started", "id": message["id"], "pid": pid})
        return True

    def _standby_child(self, sock: socket.socket, cgroup: str | None, name: str | None) -> None:
        before = set(sys.modules)
        try:
            self._child_setup(cgroup, keep=sock.fileno())
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, FDS_PER_CAPTURE)
            while data and not data.endswith(b"\n"):
                more = sock.recv(1 << 20)
                if not more:
                    break
                data += more
            sock.close()
            if not data.endswith(b"\n") or len(fds) != FDS_PER_CAPTURE:
                os._exit(0)  # the spare dropped this standby, or is gone
            forked = time.monotonic()  # the capture begins here: its ``fork`` span ends now
            if name is not None:
                _process_name(name)
        except BaseException:
            os._exit(70)
        self._child_run(json.loads(data), fds, forked, before)  # the capture message, handed on

    # -- the child -------------------------------------------------------------------------------------
    def _child(self, message: CaptureMessage, fds: list[int], cgroup: str | None) -> None:
        forked = time.monotonic()
        before = set(sys.modules)
        try:
            self._child_setup(cgroup)
        except BaseException:
            with contextlib.suppress(BaseException):
                traceback.print_exc()
            os._exit(70)
        self._child_run(message, fds, forked, before)

    def _child_setup(self, cgroup: str | None, keep: int = -1) -> None:
        """A forked child's own place: its cgroup, session and signals, none of the spare's files
        but ``keep``."""
        cgroup_join(cgroup)  # before anything else runs here, so every descendant is born inside
        set_subreaper()  # orphans of this capture come back to it (not to the spare) while it runs
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.selector.close()
        spare_files = [self.sock.fileno(), self.wake_r, self.wake_w, *self.fds]
        if self.standby is not None:
            spare_files.append(self.standby[1].fileno())
        for fd in spare_files:
            if fd != keep:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _child_run(self, message: CaptureMessage, fds: list[int], forked: float, before: set[str]) -> None:
        code = 0
        try:
            result_fd, out_fd, err_fd = fds
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            for fd in (null, out_fd, err_fd):
                os.close(fd)
            # Only now, holding nothing of the spare's: the user's code and tools may see this one.
            set_dumpable(True)
            try:
                import faulthandler

                faulthandler.enable()
                # At a capture's deadline the server asks where it is (capture/launch/supervise.py).
                faulthandler.register(signal.SIGUSR1, all_threads=True)
            except Exception:
                pass
            _limit_memory(int(message.get("memory") or 0))
            cwd = message.get("cwd")
            if cwd:
                with contextlib.suppress(OSError):
                    os.chdir(cwd)
            request = message["request"]
            request["resultFd"] = result_fd
            if request.get("snapshotOnly"):
                # The server's background request: the user's own captures go first. Here, in the
                # child that exits after it, never in a process that outlives the capture.
                with contextlib.suppress(OSError, AttributeError):
                    os.nice(10)
            if self.exiting is not None:
                self.exiting()
            try:
                capture = cast(_Capture, self.capture)  # set by serve before any fork
                result = capture(request, jax_ready=True)
                # when this child began and when its result was ready, on the server's clock
                # (monotonic is system-wide): where a live trace's time went (capture/launch/phases.py)
                result["clock"] = {"forked": forked, "done": time.monotonic()}
                try:
                    # A profile's env may change what a library does at import: not for the spare then.
                    learned = (
                        [] if request.get("env") else installed_imports(before, str(request.get("workspaceRoot") or ""))
                    )
                except Exception:  # what the spare could learn is never worth a capture
                    learned = []
                refused = set(message.get("refused") or ())
                learned = [m for m in learned if m not in refused]
                extra = cast("dict[str, object]", result)  # what the spare learns, beside the result
                if learned:
                    extra["imported"] = learned
                    # what each held when this capture was done with it, to compare with the
                    # spare's own import of it (:meth:`ForkServer._preload`): 0.1-0.3 ms a module,
                    # once (a module preloaded or refused is not reported again)
                    extra["importedState"] = {m: module_state(sys.modules.get(m)) for m in learned}
                data = json.dumps(result, separators=(",", ":")).encode()
                from jaxlsp.worker.tracing.limits import check_bytes

                data = check_bytes(data, request.get("limits"))
            except MemoryError:
                data = _error("memory", "The capture ran out of memory (MemoryError).")
            except BaseException as exc:
                data = _error(
                    "internal", f"The capture worker failed: {type(exc).__name__}: {exc}", traceback.format_exc()
                )
            try:
                _write_all(result_fd, data)
                os.close(result_fd)
            except OSError as exc:
                code = 70
                sys.stderr.write(f"jaxlsp: the capture's result could not be written: {exc}\n")
        except BaseException:
            code = 70
            with contextlib.suppress(BaseException):
                traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(BaseException):
                    stream.flush()
            os._exit(code)


def _process_name(name: str) -> str | None:
    """Name this process (Linux: its ``comm``, what ``ps`` and /proc/PID/stat show); the name it
    had, or None where it cannot be named."""
    try:
        with open("/proc/self/comm", "r+", encoding="utf-8") as f:
            had = f.read().strip()
            f.seek(0)
            f.write(name[:15])
        return had
    except OSError:
        return None


def installed_imports(before: set[str], workspace_root: str) -> list[str]:
    """The modules imported since ``before`` that a warm spare may preload: files of installed
    libraries (under site-packages or dist-packages, or the standard library), never a workspace
    file or jaxlsp's own, in the order they were imported."""
    from jaxlsp.worker.core.failures import Workspace, installed, realpath

    workspace = Workspace(workspace_root)
    out: list[str] = []
    for name, module in list(sys.modules.items()):
        if name in before or not _MODULE_NAME.fullmatch(name):
            continue
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or path.startswith("<"):
            continue
        real = realpath(path)
        if workspace.contains(real):
            continue
        if installed(real):
            out.append(name)
            if len(out) >= MAX_LEARNED:
                break
    return out


#: how deep :func:`module_state` looks into a module's values, how many items of one it reads, and
#: how many values of one module it spells at most (the same ones in every process: a fresh import
#: and the spare's read alike): 0.05-0.2 ms a module
_STATE_DEPTH = 2
_STATE_ITEMS = 16
_STATE_VALUES = 200
_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def module_state(module: object) -> str:
    """A digest of what a module holds that a fresh import in another process would spell the same
    way: its plain values (numbers, text, and tuples / lists / sets / dicts of them), the defaults
    of its own functions, and the plain values of its own classes and of instances of them. A
    library whose import read the working folder, ``sys.path``, the environment or ``sys.argv``
    into such a value digests differently in the warm spare (which imports it elsewhere) than in
    the capture that imported it fresh; the spare then does not keep it (:meth:`ForkServer._preload`).
    Identities, addresses and other objects are named by their type only."""
    import hashlib

    name = getattr(module, "__name__", "")
    left = [_STATE_VALUES]

    def spell(x: object, depth: int) -> object:
        kind = type(x)
        if kind in _PLAIN:
            return x if not isinstance(x, str) or len(x) < 256 else hash_text(x)
        left[0] -= 1
        if depth >= _STATE_DEPTH or left[0] < 0:
            return kind.__name__
        if kind is tuple or kind is list:
            seq = cast("list[object]", x)
            return [kind.__name__, len(seq), [spell(v, depth + 1) for v in seq[:_STATE_ITEMS]]]
        # Sets and dicts sorted, and only whole: their order follows hashes and addresses, which
        # differ from one process to the next (a dict filled from a set of classes).
        if (kind is set or kind is frozenset) and len(elements := cast("set[object]", x)) <= _STATE_ITEMS:
            return [kind.__name__, sorted(repr(spell(v, depth + 1)) for v in elements)]
        if kind is dict and len(table := cast("dict[object, object]", x)) <= _STATE_ITEMS:
            return ["dict", sorted(repr([spell(k, depth + 1), spell(v, depth + 1)]) for k, v in list(table.items()))]
        if kind in (set, frozenset, dict):
            return [kind.__name__, len(cast("set[object] | dict[object, object]", x))]
        own = x if isinstance(x, type) else kind
        if getattr(x, "__module__", None) != name and getattr(own, "__module__", None) != name:
            return kind.__name__  # another module's: that module's digest has it
        if hasattr(x, "__defaults__"):  # a function of this module: what its defaults were made of
            fn = cast(FunctionType, x)  # what has defaults: a function
            return ["fn", spell(fn.__defaults__, depth + 1), spell(fn.__kwdefaults__, depth + 1)]
        members = getattr(x, "__dict__", None)
        if not isinstance(members, Mapping):
            return kind.__name__
        items = [(k, v) for k, v in list(members.items()) if not k.startswith("__")][:_STATE_ITEMS]
        return [own.__qualname__, [[k, spell(v, depth + 1)] for k, v in items]]

    def hash_text(text: str) -> str:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()

    try:
        spelled: list[object] = [[k, spell(v, 0)] for k, v in list(vars(module).items()) if not k.startswith("__")]
    except Exception as exc:  # a module that cannot be read so: never the same as a fresh import
        spelled = [f"unreadable {type(exc).__name__} {id(module)}"]
    return hashlib.blake2b(repr(spelled).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def file_signatures(names: Iterable[str]) -> dict[str, list[int]]:
    """The loaded modules' files and their folders, each with its modification time (ns), size
    and inode: the server compares them with the disk on each capture, and retires a spare whose
    preloaded code changed since it was imported (capture/launch/spare.py)."""
    out: dict[str, list[int]] = {}
    for name in names:
        path = getattr(sys.modules.get(name), "__file__", None)
        if not isinstance(path, str) or path.startswith("<"):
            continue
        for place in (path, os.path.dirname(path)):
            if place in out:
                continue
            try:
                st = os.stat(place)
            except OSError:
                continue
            out[place] = [st.st_mtime_ns, st.st_size, st.st_ino]
    return out


def _error(kind: str, message: str, trace: str | None = None) -> bytes:
    error: dict[str, str] = {"kind": kind, "message": message}
    if trace:
        error["traceback"] = trace
    return json.dumps({"ok": False, "error": error}).encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _limit_memory(memory: int) -> None:
    if memory <= 0:
        return
    try:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (memory if hard == resource.RLIM_INFINITY else min(memory, hard), hard))
    except (ImportError, ValueError, OSError):
        pass


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def serve() -> None:
    """Entry point: ``argv[1]`` is a JSON config ``{fd, worker, preload, required}``."""
    config = json.loads(sys.argv[1])
    del sys.argv[1:]
    sock = socket.socket(fileno=int(config["fd"]))
    sock.setblocking(True)
    set_subreaper()  # an ended capture's escaped descendants come back here, to be killed
    set_dumpable(False)  # captures run the user's code as our user: keep them out of our /proc files
    cgroup_sweep()
    with contextlib.suppress(ImportError):
        import resource  # noqa: F401  # every forked capture's memory cap: imported once, here
    spare = ForkServer(sock, None)
    try:
        loaded, missing = _preload(list(config["preload"]), list(config["required"]))
        import importlib

        worker = importlib.import_module(config["worker"])
        spare.capture = worker.capture
        spare.warm = getattr(worker, "warm", None)
        spare.prime = getattr(worker, "prime", None)
        spare.exiting = getattr(worker, "exiting", None)
        # Work that is the same for every capture (package versions...) is done once, here.
        getattr(worker, "warm", lambda: None)()
        if _backends_initialised():
            spare.send({"event": "failed", "message": "importing jax initialised an XLA backend: forking is unsafe"})
            return
        spare.send(
            {
                "event": "ready",
                "pid": os.getpid(),
                "python": list(sys.version_info[:3]),
                "preloaded": loaded,
                "missing": missing,
                "pythonThreads": _python_threads(),
                "files": file_signatures(list(sys.modules)),
            }
        )
    except BaseException as exc:
        spare.send({"event": "failed", "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        return
    spare.run()
    # The server is gone or closed us, and every capture's group is killed and reaped: skip the
    # interpreter's (jax's) slow shutdown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _python_threads() -> int:
    import threading

    return threading.active_count()
