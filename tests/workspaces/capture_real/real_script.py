"""A notebook-style script: optional imports that fail, a training loop at the top level."""

import jax.numpy as jnp
import not_an_installed_plotting_package as plt
from jax.removed_api_module import jit
from jax.numpy import this_name_was_removed

data = jnp.ones((100, 3))
batch = data[:10]
scale = 2.0
table = {"w": jnp.zeros(3)}


def predict(params, x):
    return jnp.tanh(x @ params["w"]) * scale


def plot(params, x):
    plt.plot(predict(params, x))
    return x


def uses_data(x):
    return x + batch


def uses_removed(x):
    return this_name_was_removed(x)


for step in range(3):
    plt.show()
