"""A run of the NNX CNN (nnx_cnn.py) on a batch of blank images, as a training script starts.

jaxlsp.toml has no profile for CNN: `jaxlsp trace examples/nnx_cnn.py::CNN` reads this script's
call of the model (nothing of the script runs) and traces the model with these very inputs.
"""

import jax.numpy as jnp
from flax import nnx

from nnx_cnn import CNN, predict

BATCH = 4


def accuracy(logits, labels):
    return jnp.mean(jnp.argmax(logits, axis=-1) == labels)


if __name__ == "__main__":
    model = CNN(channels=8, rngs=nnx.Rngs(0))
    images = jnp.ones((BATCH, 28, 28, 1))
    print("logits", model(images).shape)
    print("classes", predict(model, images))
    print("accuracy", accuracy(model(images), jnp.zeros((BATCH,), jnp.int32)))
