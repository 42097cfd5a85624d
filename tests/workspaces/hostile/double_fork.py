"""Double-forks a grandchild that is re-parented away from the worker, then traces fine."""

import os

import jax.numpy as jnp

middle = os.fork()
if middle == 0:
    grandchild = os.fork()
    if grandchild == 0:
        os.write(1, f"hostile-grandchild: {os.getpid()}\n".encode())
        os.execvp("sleep", ["sleep", "1000"])
    os._exit(0)
os.waitpid(middle, 0)


def f(x):
    return jnp.sin(x)
