"""Linen fixtures for the capture tests."""

import flax.linen as nn
import jax


class MLP(nn.Module):
    hidden: int = 16
    features: int = 4

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.hidden)(x)
        x = jax.nn.relu(x)
        return nn.Dense(self.features)(x)


class Net(nn.Module):
    """Dropout, batch norm and a ``train`` flag."""

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.Dense(8)(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        x = nn.Dropout(0.5, deterministic=not train)(x)
        return nn.Dense(2)(x)


class Encoder(nn.Module):
    def setup(self):
        self.embed = nn.Dense(3)
        self.out = nn.Dense(2)

    def __call__(self, x):
        return self.out(self.embed(x))

    def encode(self, x):
        return self.embed(x)


def make_bound():
    model = MLP(hidden=8, features=2)
    x = jax.ShapeDtypeStruct((1, 5), jax.numpy.float32)
    variables = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), x)
    return model.bind(variables)


INIT_CALLS = []  # each run of Counted's initialiser, in the process that imported this file


def counted_init(key, shape, dtype=jax.numpy.float32):
    INIT_CALLS.append(shape)
    return jax.nn.initializers.lecun_normal()(key, shape, dtype)


class Counted(nn.Module):
    """Lifted transforms (scan, remat), a boxed parameter and an initialiser that counts its runs."""

    @nn.compact
    def __call__(self, x):
        w = self.param("w", nn.with_partitioning(counted_init, (None, "model")), (x.shape[-1], 6))
        x = nn.remat(nn.Dense)(6)(x @ w)
        scanned = nn.scan(
            lambda mdl, c, _: (nn.tanh(nn.Dense(6)(c)), None),
            variable_broadcast="params",
            split_rngs={"params": False},
            length=3,
        )
        x, _ = scanned(self, x, None)
        return nn.Dense(2)(x)


def make_mismatched():
    """Variables of a 8-wide MLP bound to a 16-wide one: Flax's own check must refuse them."""
    x = jax.ShapeDtypeStruct((1, 5), jax.numpy.float32)
    variables = jax.eval_shape(lambda x: MLP(hidden=8).init(jax.random.key(0), x), x)
    return MLP(hidden=16).bind(variables)
