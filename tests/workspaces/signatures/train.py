"""Trains until stopped: a learning run must stop it once it has nothing new to teach."""

import argparse
import time

import jax.numpy as jnp

from tinylm.layers import rms_norm

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    steps = parser.parse_args().steps
    x = jnp.ones((4, 16))
    for step in range(steps):
        x = rms_norm(x) + 1.0
        time.sleep(0.01)
