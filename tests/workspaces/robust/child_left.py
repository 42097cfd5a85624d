"""Starts a child and never waits for it, then traces fine."""

import subprocess

import jax.numpy as jnp

child = subprocess.Popen(["sleep", "1002"])
print(f"robust-child: {child.pid}", flush=True)


def f(x):
    return jnp.sin(x)
