"""A script that trains at import: only its definitions can be loaded."""

import jax.numpy as jnp

SCALE = 3.0


def step(x):
    return jnp.tanh(x) * SCALE


for _ in range(3):
    print("training", step(jnp.ones(2)))
raise SystemExit("this script must not run at capture time")
