"""A Flax Linen MLP with a jitted training step and a training loop."""

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class MLP(nn.Module):
    """Two dense layers with a GELU in between."""

    hidden: int = 128
    features: int = 10
    dropout: float = 0.1

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        x = nn.Dense(self.hidden)(x)
        x = nn.gelu(x)
        x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.features)(x)


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    one_hot = jax.nn.one_hot(labels, logits.shape[-1])
    return -jnp.mean(jnp.sum(one_hot * jax.nn.log_softmax(logits), axis=-1))


@partial(jax.jit, static_argnums=(3,))
def train_step(params, batch, labels, model: MLP):
    def loss_fn(p):
        return cross_entropy(model.apply({"params": p}, batch), labels)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates = jax.tree.map(lambda g: -1e-3 * g, grads)
    return optax.apply_updates(params, updates), loss


def train(params, batches, model: MLP, epochs: int = 3):
    """A driver: loops over epochs and prints; its JAX use is incidental, so it gets no lens."""
    for epoch in range(epochs):
        for batch, labels in batches:
            params, loss = train_step(params, batch, labels, model)
        print(f"epoch {epoch}: loss {float(loss):.3f}")
    return params
