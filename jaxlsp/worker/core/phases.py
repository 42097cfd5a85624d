"""Progress on the result pipe, ahead of the result: ``#phase NAME`` lines, which the client reads
to say what a capture is doing, and a learning run's ``#learned [records]`` lines, the signatures it
recorded since the last one (stdlib only).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jaxlsp.worker.protocol import WorkerRequest


def announce(request: WorkerRequest, phase: str) -> None:
    """Tell the client which phase starts: a ``#phase NAME`` line on the result pipe, ahead of the
    result (which is JSON, so never starts with ``#``). In-process captures have no pipe."""
    fd = request.get("resultFd")
    if isinstance(fd, int) and fd >= 0:
        with contextlib.suppress(OSError):
            write_all(fd, f"#phase {phase}\n".encode())


def send_learned(fd: int, records: list[dict[str, object]]) -> None:
    """A ``#learned`` line: ``records`` (learning's signature records) as one line of JSON. Raises
    ``OSError`` when the pipe is gone, ``TypeError``/``ValueError`` when a record is not JSON."""
    line = json.dumps(records, allow_nan=False, separators=(",", ":"))
    write_all(fd, f"#learned {line}\n".encode())


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
