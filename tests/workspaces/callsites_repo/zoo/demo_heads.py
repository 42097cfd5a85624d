"""A module whose import runs a small demo (a module-level toy run)."""

import os

import jax
import jax.numpy as jnp

from zoo.eqx_models import Head

size = int(os.environ.get("ZOO_HEAD_SIZE", "8"))
head = Head(size, 2, key=jax.random.key(0))
probabilities = head(jnp.linspace(0.0, 1.0, size))
