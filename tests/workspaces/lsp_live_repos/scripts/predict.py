"""A script that fetches its weights from a server, then predicts."""

import jax.numpy as jnp

from remote import Store, predict

store = Store.open("tiny")
print(predict(store, jnp.ones((3, 4))))
