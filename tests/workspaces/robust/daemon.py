"""Daemonises a grandchild the classic way (fork, setsid, fork, stdio to /dev/null), then traces."""

import os

import jax.numpy as jnp

middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(1, f"robust-daemon: {os.getpid()}\n".encode())
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execvp("sleep", ["sleep", "1003"])
    os._exit(0)
os.waitpid(middle, 0)


def f(x):
    return jnp.sin(x)
