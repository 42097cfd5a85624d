"""Equinox's training-loop pattern: an eqx.filter_jit step over (model, opt_state) from optax,
returning the updated model (static activation functions included) and the loss."""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

FACTORY_SAW_TRACERS: list[bool] = []  # per factory run: were its arrays abstract?


class Model(eqx.Module):
    conv: eqx.nn.Conv2d
    mlp: eqx.nn.MLP

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 2, kernel_size=3, key=k1)
        self.mlp = eqx.nn.MLP(2 * 6 * 6, 3, 8, 1, key=k2)

    def __call__(self, x):
        return self.mlp(jnp.ravel(jax.nn.relu(self.conv(x))))


def loss(model, x, y):
    pred = jax.vmap(model)(x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(pred), y[:, None], axis=1))


optim = optax.adamw(1e-3)


@eqx.filter_jit
def make_step(model, opt_state, x, y):
    loss_value, grads = eqx.filter_value_and_grad(loss)(model, x, y)
    updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    model = eqx.apply_updates(model, updates)
    return model, opt_state, loss_value


def inputs():
    model = Model(jax.random.key(0))
    FACTORY_SAW_TRACERS.append(isinstance(model.conv.weight, jax.core.Tracer))
    opt_state = optim.init(eqx.filter(model, eqx.is_inexact_array))
    return {"args": [model, opt_state, jnp.zeros((4, 1, 8, 8)), jnp.zeros((4,), jnp.int32)]}


def concrete_inputs():
    x = jnp.arange(4.0)
    if float(x.sum()) > 0:  # needs a real value: runs eagerly, after the abstract attempt fails
        x = x / x.sum()
    return {"args": [x]}


def normalize(x):
    return x / jnp.linalg.norm(x)
