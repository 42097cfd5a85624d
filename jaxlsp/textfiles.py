"""Reading a workspace's text files without trusting what they are.

A repository can hold a FIFO named ``model.py`` (an ordinary ``open`` blocks forever), a symlink
``zero.py -> /dev/zero`` (an ordinary ``read`` never ends) or a file of gigabytes. Every read of a
workspace file by the server (sources, ``jaxlsp.toml``) goes through :func:`read_text`, and every
graph file a client names (``jaxlsp/diff``) through :func:`read_bytes`: opened without blocking,
checked to be a regular file after opening (so nothing can be swapped in between a check and the
read), and read up to a size cap. A refusal for want of descriptors or memory is raised
(:class:`Shortage`), never returned as the file's state. :func:`unresolvable` says why a path the
server was given can not be followed at all (a symlink loop, a NUL character), before anything
resolves it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class Unreadable(str):
    """Why a file was not read (a ``str``, so callers keep it as the reason)."""


# The system refused for want of a resource: nothing about the file, so never a reason to keep.
SHORTAGES = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS)


class Shortage(OSError):
    """A read refused for want of descriptors or memory. Raised, not returned: an index that took
    it for the file's state would forget the file, and a lens request would answer nothing."""


def read_text(path: Path, limit: int) -> str | Unreadable:
    """The file's text (UTF-8, undecodable bytes replaced), or why it was not read."""
    data = read_bytes(path, limit)
    return data if isinstance(data, Unreadable) else data.decode("utf-8", errors="replace")


def read_bytes(path: Path, limit: int) -> bytes | Unreadable:
    """The file's bytes, or why it was not read (graph files a client names: ``jaxlsp/diff``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a.py -> b.py -> a.py
            return Unreadable(f"it is a symlink loop ({exc.strerror})")
        if exc.errno in SHORTAGES:
            raise Shortage(exc.errno, f"cannot open {path}: {exc.strerror}") from None
        return Unreadable(f"cannot open it: {exc.strerror or exc}")
    except ValueError as exc:  # a NUL character in the path
        return Unreadable(f"cannot open it: {exc}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return Unreadable("it is not a regular file")
        if info.st_size > limit:
            return Unreadable(too_large(limit))
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return Unreadable(f"cannot read it: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after the stat
        return Unreadable(too_large(limit))
    return data


def too_large(limit: int) -> str:
    return f"the file is larger than {limit // 1024:,} KiB"


def unresolvable(path: Path) -> str | None:
    """Why ``path`` cannot be resolved (``Path.resolve`` would raise), else None. A repository can
    hold ``a.py -> b.py`` and ``b.py -> a.py``; Python 3.11's ``resolve`` raises RuntimeError on
    them, and ``os`` raises ValueError on a NUL character and UnicodeEncodeError on characters the
    file system cannot spell. A path that does not exist (yet) resolves: it is not a reason."""
    loop = f"it is a symlink loop ({os.strerror(errno.ELOOP)})"
    try:
        # One stat, which the kernel follows: it fails on a loop (ELOOP), as Python 3.11's resolve
        # does (RuntimeError), where resolve's lstat of every part of the path cost each request
        # 0.3 ms of the event loop (1,000 traces: 18,529 lstat calls, cProfile; issue 25).
        os.stat(path)
    except ValueError as exc:  # UnicodeEncodeError is one
        if "\x00" in str(path):
            return "the path contains a NUL character"
        return f"the path cannot be encoded for the file system ({type(exc).__name__})"
    except OSError as exc:
        return loop if exc.errno == errno.ELOOP else None  # a missing file is not a reason
    return None


def real_path(path: Path) -> Path:
    """``path.resolve()``, or the absolute path when it cannot be resolved (:func:`unresolvable`):
    whoever reads it then meets the reason as an unreadable file (``ELOOP``), never an exception."""
    try:
        return path.resolve()
    except (RuntimeError, OSError, ValueError):
        return Path(os.path.abspath(path))
