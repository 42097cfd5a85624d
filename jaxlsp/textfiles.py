"""Reading a workspace's text files without trusting what they are.

A repository can hold a FIFO named ``model.py`` (an ordinary ``open`` blocks forever), a symlink
``zero.py -> /dev/zero`` (an ordinary ``read`` never ends) or a file of gigabytes. Every read of a
workspace file by the server (sources, ``jaxlsp.toml``) goes through :func:`read_text`, and every
graph file a client names (``jaxlsp/diff``) through :func:`read_bytes`: opened without blocking,
checked to be a regular file after opening (so nothing can be swapped in between a check and the
read), and read up to a size cap. A refusal for want of descriptors or memory is raised
(:class:`Shortage`), never returned as the file's state.
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
