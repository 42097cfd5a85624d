"""Starts a child that would outlive the capture, then traces fine."""

import subprocess

import jax.numpy as jnp

child = subprocess.Popen(["sleep", "1000"])
print(f"hostile-child: {child.pid}", flush=True)


def f(x):
    return jnp.sin(x)
