"""Forks a burst of 300 children, each leaving the worker's session (setsid) to run `sleep 1001`,
reports their pids on one stdout line, and traces fine."""

import os

import jax.numpy as jnp

pids = []
for _ in range(300):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execvp("sleep", ["sleep", "1001"])
    pids.append(pid)
print("robust-burst:", " ".join(map(str, pids)), flush=True)


def f(x):
    return jnp.sin(x)
