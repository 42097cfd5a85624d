"""Live shapes: ``predict``'s only complete call site (scripts/predict.py) builds its weights with
``Store.open(...)``, whose name does not say that it connects to a server: the live trace's
capture refuses the connection, and the target is not live (it would have downloaded)."""

import socket

import jax.numpy as jnp


class Store:
    def __init__(self, w):
        self.w = w

    @classmethod
    def open(cls, name):
        with socket.create_connection((f"{name}.weights.invalid", 443), timeout=30):
            pass
        return cls(jnp.ones((4, 2)))


def predict(store, x):
    y = x @ store.w
    return jnp.tanh(y)
