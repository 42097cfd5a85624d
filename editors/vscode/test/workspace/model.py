import jax
import jax.numpy as jnp


@jax.jit
def mlp(w1, w2, x):
    h = jax.nn.relu(x @ w1)
    logits = h @ w2
    return jax.nn.log_softmax(logits)


def scale(x: jax.Array):
    return jnp.sin(x) * 2.0
