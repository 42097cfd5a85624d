"""The warm spare's priming yields to the server (process/forkserver.py ``_prime``): a message
waiting on its socket, a capture most often, stops the calls of JAX's functions it was making, so
an edit's capture never waits behind the primes of a large trace. No JAX here: the worker's
``prime`` is a stand-in that counts the calls it was let make."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from jaxlsp.worker.process import forkserver
from jaxlsp.worker.process.forkserver import ForkServer


@pytest.fixture(autouse=True)
def no_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test process may have started an XLA backend (another test's capture, same worker):
    the spare's own guard would then retire it; what is tested here is when priming stops."""
    monkeypatch.setattr(forkserver, "_backends_initialised", lambda: False)
    yield


def _spare() -> tuple[ForkServer, socket.socket, list[int]]:
    ours, theirs = socket.socketpair()
    spare = ForkServer(ours, None)
    made: list[int] = []

    def prime(entries: Any, stop: Any) -> int:
        for entry in entries:
            if stop():
                break
            made.append(entry)
        return len(made)

    spare.prime = prime
    return spare, theirs, made


def test_priming_stops_for_a_waiting_capture() -> None:
    spare, server, made = _spare()
    server.sendall(b'{"op": "capture", "id": 1}\n')  # arrived while the spare was about to prime
    spare._prime(list(range(100)))
    assert made == []
    assert b'"event": "primed"' in server.recv(4096)  # it still says what it made: nothing


def test_priming_stops_for_a_message_already_read() -> None:
    spare, _server, made = _spare()
    spare.buffer = b'{"op": "capture", "id": 2}\n'  # read with the prime request, not handled yet
    spare._prime(list(range(100)))
    assert made == []


def test_priming_runs_to_its_end_when_nothing_waits() -> None:
    spare, _server, made = _spare()
    spare._prime(list(range(100)))
    assert made == list(range(100))
