"""A Flax Linen CNN with batch norm and dropout (mutable batch_stats, a dropout rng stream)."""

import flax.linen as nn
import jax


class CNN(nn.Module):
    features: int = 32
    classes: int = 10
    dropout: float = 0.25

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        x = nn.Conv(self.features, kernel_size=(3, 3))(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        x = nn.avg_pool(nn.relu(x), window_shape=(2, 2), strides=(2, 2))
        x = nn.Conv(2 * self.features, kernel_size=(3, 3))(x)
        x = nn.avg_pool(nn.relu(x), window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.classes)(x)
