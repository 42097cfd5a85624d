"""SIGKILLs its own worker halfway through writing the result (os.write is wrapped, so the first
half of the graph's JSON goes out and then the process dies)."""

import os
import signal

import jax.numpy as jnp

_write = os.write


def _half_then_die(fd: int, data: bytes) -> int:
    if fd > 2 and len(data) > 200:
        _write(fd, bytes(data[: len(data) // 2]))
        os.kill(os.getpid(), signal.SIGKILL)
    return _write(fd, data)


os.write = _half_then_die


def f(x):
    return jnp.sin(x) + jnp.cos(x)
