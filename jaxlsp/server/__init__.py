"""The language server: thin pygls adapters over discovery, recipes, capture and graphs."""

from __future__ import annotations

import logging
import os
import sys

MAX_LOG_LINE = 4000  # characters of one log record (pygls logs whole params, 10 MB and all)
SWITCH_INTERVAL = 0.001  # seconds a thread may hold the GIL while another waits (CPython: 0.005)


def _shorten(record: logging.LogRecord) -> bool:
    message = record.getMessage()
    if len(message) > MAX_LOG_LINE:
        record.msg = f"{message[:MAX_LOG_LINE]}... ({len(message):,} characters)"
        record.args = None
    return True


def _routine_cancel(record: logging.LogRecord) -> bool:
    """Drops pygls' warning about ``$/cancelRequest`` for a request already answered: editors send
    it routinely (VS Code for every superseded hover or lens) and show the server's stderr as
    errors, so the warning would read as a fault."""
    return not str(record.msg).startswith("Cancel notification for unknown message id")


def _answered_refusal(record: logging.LogRecord) -> bool:
    """Drops pygls' ERROR with a traceback for a handler's ``JsonRpcException``: that is a refusal
    the client was answered with (an unknown trace, no earlier trace to compare with, an untrusted
    folder) and shows its user; logged as a fault, every first trace's diff request put a red
    traceback in VS Code's output channel. Any other exception is still logged whole."""
    if record.exc_info is None or record.exc_info[1] is None:
        return True
    from pygls.exceptions import JsonRpcException

    return not isinstance(record.exc_info[1], JsonRpcException)


def _guard_process() -> None:
    """Keep the user's traced code out of this process (issue 25): not dumpable, so a capture
    running as the same user cannot read ``/proc/<server>/environ`` or open the protocol streams
    through ``/proc/<server>/fd/N``. Before anything is read from the client."""
    from jaxlsp.worker.containment import set_dumpable

    why = set_dumpable(False)
    if why is not None:
        logging.getLogger(__name__).info("the server stays dumpable: %s", why)


def serve(tcp: tuple[str, int] | None = None) -> None:
    """Run the server on stdio (the default) or TCP. Nothing but protocol ever reaches stdout."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="jaxlsp %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_routine_cancel)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_answered_refusal)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_shorten)
    _guard_process()
    from jaxlsp.server.app import create_server
    from jaxlsp.server.viewer_http import raise_fd_limit

    # Threads hand the GIL to each other at most every switch interval: the writer thread (one
    # hand-over per 64 KiB a pipe takes) and the pool waited up to 5 ms for each while the loop
    # worked in slices, so a big answer ahead of a hover cost that hover 0.1-0.4 s (issue 25).
    sys.setswitchinterval(SWITCH_INTERVAL)
    raise_fd_limit()  # descriptors in reserve for the server's own work (docs/security.md)
    server = create_server()
    if tcp is not None:
        server.start_tcp(*tcp)
        return
    # Keep the protocol on a private copy of fd 1, and point fd 1 and sys.stdout at stderr, so a
    # stray print (ours, a library's or a C extension's) can never corrupt the message stream.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    server.start_io(sys.stdin.buffer, protocol_out)
