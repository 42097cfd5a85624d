"""Flax's MNIST example, trimmed: a CNN, a TrainState, apply_model with value_and_grad; and a
function of Linen variables by name (``loss(params, batch_stats, x)``)."""
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax.training import train_state


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(features=32, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(features=10)(x)
        return x


@jax.jit
def apply_model(state, images, labels):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, images)
        one_hot = jax.nn.one_hot(labels, 10)
        loss = jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=one_hot))
        return loss, logits

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    (loss, logits), grads = grad_fn(state.params)
    accuracy = jnp.mean(jnp.argmax(logits, -1) == labels)
    return grads, loss, accuracy


@jax.jit
def update_model(state, grads):
    return state.apply_gradients(grads=grads)


def create_train_state():
    cnn = CNN()
    params = cnn.init(jax.random.key(0), jnp.ones([1, 28, 28, 1]))["params"]
    tx = optax.sgd(0.1, 0.9)
    return train_state.TrainState.create(apply_fn=cnn.apply, params=params, tx=tx)


def inputs():
    state = create_train_state()
    return {"args": [state, jnp.zeros((8, 28, 28, 1)), jnp.zeros((8,), jnp.int32)]}


def step_inputs():
    state = create_train_state()
    grads = jax.tree_util.tree_map(jnp.zeros_like, state.params)
    return {"args": [state, grads]}


class BN(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.BatchNorm(use_running_average=True)(nn.Dense(4)(x))


def bn_inputs():
    variables = BN().init(jax.random.key(0), jnp.ones((2, 3)))
    return {"args": [variables["params"], variables["batch_stats"], jnp.ones((2, 3))]}


def bn_loss(params, batch_stats, x):
    return BN().apply({"params": params, "batch_stats": batch_stats}, x).sum()


if __name__ == "__main__":
    raise SystemExit("training would start here")
