"""Train a tiny ResNet on random data (a training script, run as __main__ with arguments)."""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax

from zoo.functions import normalize
from zoo.resnet import ResNetTiny


def create_train_state(rng, learning_rate):
    model = ResNetTiny(num_classes=10, num_filters=4)
    variables = model.init(rng, jnp.ones([1, 16, 16, 3]), train=False)
    tx = optax.sgd(learning_rate)
    return model, variables, tx.init(variables["params"])


def load_batch(batch_size):
    return np.random.default_rng(0).normal(size=(batch_size, 7)).astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    batches = [normalize(load_batch(args.batch_size)) for _ in range(args.steps)]
    model, variables, opt_state = create_train_state(jax.random.key(0), 0.1)
    for batch in batches:
        print("batch", batch.shape)


if __name__ == "__main__":
    main()
