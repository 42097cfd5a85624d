"""The zoo's tests, as a repository would write them."""

import os
import time

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import data_utils  # found through pytest's pythonpath setting (pyproject.toml)
from zoo import ResNet18
from zoo.eqx_models import CNN, Head
from zoo.functions import attention, mse, never_called_statically, normalize, slow_to_reach, unreachable
from zoo.rnn import GRUCell
from zoo.transformer import TransformerConfig, TransformerLM

BATCH = 4
SHAPE = (BATCH, 6)


def test_resnet18():
    model = ResNet18(num_classes=10, num_filters=4)
    x = jnp.ones((2, 32, 32, 3))
    variables = model.init(jax.random.key(0), x, train=False)
    out = model.apply(variables, x, train=False)
    assert out.shape == (2, 10)


def test_transformer():
    config = TransformerConfig(vocab_size=32, deterministic=True)
    model = TransformerLM(config)
    tokens = jnp.zeros((2, 8), jnp.int32)
    variables = model.init(jax.random.PRNGKey(0), tokens)
    assert model.apply(variables, tokens).shape == (2, 8, 32)


def test_gru():
    cell = GRUCell(4, 8, rngs=nnx.Rngs(0))
    cell.eval()  # Flax's own method: no call site of the cell
    carry = jnp.zeros((2, 8))
    x = jnp.ones((2, 4))
    new, _ = cell(carry, x)
    assert new.shape == (2, 8)


def test_cnn():
    model = CNN(jax.random.PRNGKey(0))
    x = jnp.ones((1, 28, 28))
    assert model(x).shape == (10,)


def test_head_vmap():
    head = Head(16, 4, key=jax.random.key(1))
    out = jax.vmap(head)(jnp.ones((5, 16)))
    assert out.shape == (5, 4)


def test_attention():
    q = jax.random.normal(jax.random.key(0), (4, 8))
    assert attention(q, q, q, causal=True).shape == (4, 8)


def test_mse():
    params = {"w": jnp.zeros((3, 1)), "b": jnp.zeros((1,))}
    assert mse(params, jnp.ones((5, 3)), jnp.ones((5, 1))) == 1.0


def test_normalize():
    out = jax.jit(normalize)(jnp.ones(SHAPE))
    assert out.shape == SHAPE


def test_from_fixture(zoo_batch):
    assert never_called_statically(zoo_batch).shape == (2, 3)


def test_prints_and_writes():
    print("hello from the test")
    with open("written_by_test.txt", "w") as f:
        f.write(os.getcwd())
    x = data_utils.make_batch(3, 5)
    assert never_called_statically(x).shape == (3, 5)


@pytest.mark.slow
def test_hangs_before():
    x = data_utils.make_batch(2, 2)
    time.sleep(1000)
    slow_to_reach(x)


def test_never_reaches():
    x = data_utils.make_batch(2, 2)
    if x.shape[0] > 100:
        unreachable(x)


def test_fails_before():
    x = data_utils.make_batch(2, 2)
    assert x.shape == (9, 9), "the batch is not what this test expects"
    unreachable(x)
