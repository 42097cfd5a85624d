"""Daemonises a grandchild the classic way (fork, setsid, fork, stdio to /dev/null): it leaves the
worker's process group and session, then traces fine.

The grandchild reports its pid before this module goes on (it writes to a pipe once it has): on a
busy machine it could otherwise run only after the capture had ended and its stdout was read.
"""

import os

import jax.numpy as jnp

ready, told = os.pipe()
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(1, f"robust-daemon: {os.getpid()}\n".encode())
        os.write(told, b".")
        os.close(ready)
        os.close(told)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execvp("sleep", ["sleep", "1003"])
    os._exit(0)
os.close(told)
os.waitpid(middle, 0)
os.read(ready, 1)
os.close(ready)


def f(x):
    return jnp.sin(x)
