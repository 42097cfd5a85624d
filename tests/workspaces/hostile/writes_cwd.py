"""Writes files into the current directory at import and at trace time."""

import os

import jax.numpy as jnp

print(f"hostile-cwd: {os.getcwd()}", flush=True)
with open("written-at-import.txt", "w") as out:
    out.write("import\n")


def f(x):
    with open("written-at-trace.txt", "w") as out:
        out.write("trace\n")
    os.mkdir("made-at-trace")
    return jnp.sin(x)
