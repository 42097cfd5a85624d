"""Containment of the warm spare's captures (Linux, stdlib only): the spare as their subreaper, kept
out of /proc, escaped descendants killed, and each capture in a cgroup of its own where one can be
made (memory and pids limits, killed whole).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

# -- containment: what a capture starts ends with it -------------------------------------------------
# A process group is left by anything that calls setsid (a daemon). Two mechanisms catch those, each
# where the platform allows it, and both degrade to nothing elsewhere (docs/security.md says what holds where):
# - a child subreaper (Linux prctl): orphaned descendants are re-parented to the nearest living
#   subreaper ancestor instead of init, so the capture's leader, then the spare, inherits them;
# - a per-capture cgroup (v1 ``pids`` hierarchy, writable when running as root): membership survives
#   setsid and double forks, ``pids.max`` bounds a fork burst (RLIMIT_NPROC does not bind root), and
#   the whole cgroup is killed when the capture ends.

PR_SET_CHILD_SUBREAPER = 36
PIDS_MAX_ENV = "JAXLSP_CAPTURE_PIDS_MAX"  # tasks (threads too) per capture; default DEFAULT_PIDS_MAX
CGROUPS_ENV = "JAXLSP_CAPTURE_CGROUPS"  # "0": no cgroups (the subreaper alone, as without root)
DEFAULT_PIDS_MAX = 2048
CGROUP_PREFIX = "jaxlsp-"


def set_subreaper() -> bool:
    """Make this process a child subreaper (Linux >= 3.4); False where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


PR_SET_DUMPABLE = 4


def set_dumpable(dumpable: bool) -> str | None:
    """``prctl(PR_SET_DUMPABLE)`` (Linux): None when done, else why it was not.

    A process that is not dumpable has its ``/proc/PID`` files owned by root: no other process of
    the same user can read its ``environ`` or ``mem``, open its descriptors through ``fd/N``, or
    ptrace it. The server and the warm spare clear the flag so that code traced in a trusted
    workspace cannot reach into them (docs/security.md); each capture forked from the spare sets it
    again (it runs the user's code, and is as open to the user's tools as a cold worker, which gets
    it back from ``execve``).
    """
    if not sys.platform.startswith("linux"):
        return f"not on {sys.platform}: no prctl, and /proc is not how other processes reach this one"
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if int(libc.prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0)) != 0:
            return f"prctl(PR_SET_DUMPABLE) failed: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return f"prctl is not reachable through ctypes: {exc}"
    return None


def _children(pid: int) -> list[int]:
    """Live children of ``pid`` (Linux ``/proc``; empty elsewhere)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found.extend(int(p) for p in f.read().split())
        except (OSError, ValueError):
            continue
    return found


def kill_orphans(keep: set[int], rounds: int = 200) -> None:
    """SIGKILL every child of this (subreaper) process except ``keep``, and what they re-parent
    to us as they die, then reap them. Bounded: a burst still forking is caught by its cgroup."""
    for _ in range(rounds):
        strays = [pid for pid in _children(os.getpid()) if pid not in keep]
        if not strays:
            return
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)


def _pids_root() -> str | None:
    """This process's own cgroup in the v1 ``pids`` hierarchy, as a path; None without one."""
    mount = "/sys/fs/cgroup/pids"
    if os.environ.get(CGROUPS_ENV) == "0":
        return None
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and "pids" in parts[1].split(","):
            path = os.path.join(mount, parts[2].lstrip("/"))
            return path if os.access(path, os.W_OK) else None
    return None


def cgroup_create(name: str) -> str | None:
    """A fresh pids cgroup ``jaxlsp-NAME`` beside ours, with ``pids.max`` set; None if not allowed."""
    root = _pids_root()
    if root is None:
        return None
    path = os.path.join(root, CGROUP_PREFIX + name)
    try:
        limit = int(os.environ.get(PIDS_MAX_ENV) or DEFAULT_PIDS_MAX)
    except ValueError:
        limit = DEFAULT_PIDS_MAX
    try:
        os.mkdir(path)
    except OSError:
        return None
    try:
        with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as f:
            f.write(str(max(limit, 16)))
    except OSError:
        cgroup_remove(path)
        return None
    return path


def cgroup_sweep() -> None:
    """Remove the empty capture cgroups of processes that are gone (a server or spare that was
    killed before it could clean up leaves its ``jaxlsp-PID-*`` folders behind)."""
    root = _pids_root()
    if root is None:
        return
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            owner = name[len(CGROUP_PREFIX) :].split("-", 1)[0]
            if name.startswith(CGROUP_PREFIX) and owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(root, name))  # fails, as it should, while it holds a process


def cgroup_join(path: str | None, pid: int = 0) -> bool:
    """Move ``pid`` (0: this process) into the cgroup; its later children are born inside."""
    if not path:
        return False
    try:
        with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as f:
            f.write(str(pid or os.getpid()))
        return True
    except OSError:
        return False


def cgroup_kill(path: str | None, timeout: float = 5.0) -> bool:
    """SIGKILL every member until none is left (none can leave, and pids.max bounds new ones),
    then remove the cgroup; False if something survived ``timeout``."""
    if not path:
        return True

    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as f:
                members = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            members = []
        if not members:
            break
        if time.monotonic() > deadline:
            return False
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return cgroup_remove(path)


def cgroup_remove(path: str) -> bool:

    for _ in range(100):  # a killed member leaves the cgroup only once it is reaped
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.01)
    return False
