"""A Flax NNX convolutional classifier."""

from flax import nnx


class CNN(nnx.Module):
    def __init__(self, channels: int = 32, classes: int = 10, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, channels, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(channels, 2 * channels, kernel_size=(3, 3), rngs=rngs)
        self.head = nnx.Linear(2 * channels * 7 * 7, classes, rngs=rngs)

    def __call__(self, x):
        x = nnx.avg_pool(nnx.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.avg_pool(nnx.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        return self.head(x.reshape(x.shape[0], -1))


class Count(nnx.Variable):
    """A variable type, not a module: no lens."""


@nnx.jit
def predict(model: CNN, images):
    return model(images).argmax(axis=-1)
