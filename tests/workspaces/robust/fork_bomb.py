"""Forks sleeping children until fork fails (bounded at 1,500 so a machine without pids.max
survives), reports how many it got, and traces fine."""

import os
import time

import jax.numpy as jnp

count = 0
while count < 1500:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        while True:
            time.sleep(1000)
    count += 1
print(f"robust-forks: {count}", flush=True)


def f(x):
    return jnp.sin(x)
