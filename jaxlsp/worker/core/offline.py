"""A live capture reaches no other machine: its sockets to anything but this one are refused
(stdlib only).

A live trace runs because a file was opened or saved, not because the user asked for a run, so
it must not download a checkpoint or a data set. ``jaxlsp/live/downloads.py`` keeps call sites
whose arguments say they download (``from_pretrained``) out of live traces before anything runs;
this is the guard behind it for what no name shows (a workspace helper that fetches, a module
that downloads at import). An audit hook (PEP 578) refuses each ``socket.connect`` and
``socket.getaddrinfo`` of a host other than loopback, at once: nothing waits for a network
timeout. The user's code may catch the error and go on (the Hub's client falls back to its
cache, then fails on its own); whatever it does, :func:`attempts` tells the capture that the
network was wanted, and a failed capture becomes a refusal that says so. The hook stays
installed (audit hooks cannot be removed) but does nothing outside :func:`offline`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TypedDict

_LOOPBACK = frozenset({"localhost", "::1", "0:0:0:0:0:0:0:1", "ip6-localhost"})


class _State(TypedDict):
    on: bool  # inside offline(): refuse
    installed: bool  # the audit hook is installed (for good)
    attempts: list[str]  # the hosts refused in the last offline() block


_state: _State = {"on": False, "installed": False, "attempts": []}


class NetworkRefused(ConnectionRefusedError):
    """What a refused socket call raises (a ConnectionError, as an offline machine's would be)."""


def _remote(host: object) -> str | None:
    """``host`` as written when it is another machine; None for loopback and local sockets."""
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return None
    local = not host or host in _LOOPBACK or (host.startswith("127.") and host.replace(".", "").isdigit())
    return None if local else host


def _hook(event: str, args: tuple[object, ...]) -> None:
    if not _state["on"]:
        return
    host: str | None = None
    port: object = None
    if event == "socket.connect" and len(args) >= 2 and isinstance(args[1], tuple) and args[1]:
        host, port = _remote(args[1][0]), args[1][1] if len(args[1]) > 1 else None
    elif event == "socket.getaddrinfo" and args:
        host, port = _remote(args[0]), args[1] if len(args) > 1 else None
    if host is None:
        return
    where = f"{host}:{port}" if port not in (None, 0, "") else host
    _state["attempts"].append(where)
    raise NetworkRefused(f"jaxlsp: a live trace does not use the network (refused {where})")


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Refuse connections to other machines until the block ends."""
    if not _state["installed"]:
        sys.addaudithook(_hook)
        _state["installed"] = True
    _state["on"], _state["attempts"] = True, []
    try:
        yield
    finally:
        _state["on"] = False


def attempts() -> list[str]:
    """The hosts (``host:port``) refused in the last :func:`offline` block, in order."""
    return list(_state["attempts"])


def refusal(message: str) -> str:
    """A failed capture's message when it wanted the network: the refusal first, then the error."""
    wanted = attempts()
    return (
        f"it needs the network (it tried to reach {wanted[0]}), and a live trace never downloads: "
        f"trace it yourself to let it ({message})"
    )
