"""Equinox models."""

import equinox as eqx
import jax
import jax.numpy as jnp


class CNN(eqx.Module):
    layers: list

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.layers = [
            eqx.nn.Conv2d(1, 3, kernel_size=4, key=k1),
            eqx.nn.MaxPool2d(kernel_size=2),
            jax.nn.relu,
            jnp.ravel,
            eqx.nn.Linear(3 * 24 * 24, 16, key=k2),
            jax.nn.sigmoid,
            eqx.nn.Linear(16, 10, key=k3),
        ]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return jax.nn.log_softmax(x)


class Head(eqx.Module):
    linear: eqx.nn.Linear

    def __init__(self, in_size: int, out_size: int, *, key):
        self.linear = eqx.nn.Linear(in_size, out_size, key=key)

    def __call__(self, x):
        return jax.nn.softmax(self.linear(x))
