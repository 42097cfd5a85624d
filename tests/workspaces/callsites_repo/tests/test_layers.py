"""Tests that call the layers in all the ways the static inference reads."""

from functools import partial

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from zoo import layers
from zoo.layers import VAE, Classifier, Codec, Dropper, Mixer, Scale, Stack, classify_loss, lookup, project

FEATURES = 3


def test_project_literal_names():
    batch = 2
    shape = (batch, FEATURES)
    x = jnp.full(shape, 0.5)
    w = jnp.zeros((FEATURES, 4), dtype=jnp.bfloat16).astype(jnp.float32)
    assert project(x, w).shape == (2, 4)


def test_lookup_random():
    key = jax.random.PRNGKey(0)
    key, sub = jax.random.split(key)
    table = jax.random.uniform(sub, (10, 4), minval=-1.0, maxval=1.0)
    ids = jnp.arange(6).reshape(2, 3)
    assert lookup(table, ids).shape == (2, 3, 4)


def test_half_precision_shape_dtype():
    spec = jax.ShapeDtypeStruct((2, 5), jnp.float16)
    assert jax.eval_shape(layers.half_precision, spec).shape == (2, 5)


def test_with_numpy():
    x = np.zeros((2, 3), np.float32)
    assert layers.with_numpy(x, np.random.randn(2, 3)).shape == (2, 3)


def test_dropper_apply():
    model = Dropper(rate=0.1)
    x = jnp.ones((3, 5))
    variables = model.init(jax.random.key(0), x)
    out, updates = model.apply(
        variables, x, train=True, rngs={"dropout": jax.random.key(1)}, mutable=["batch_stats"]
    )
    assert out.shape == (3, 4)


def test_vae_encode():
    model = VAE(latents=2)
    x = jnp.ones((4, 6))
    variables = model.init(jax.random.key(0), x)
    z = model.apply(variables, x, method=VAE.encode)
    assert z.shape == (4, 2)


def test_stack_of_scales():
    model = Stack(layers=[Scale(2.0), Scale(0.5)], activation=nn.tanh)
    x = jnp.ones((2, 2))
    variables = model.init(jax.random.key(0), x, deterministic=True)
    assert model.apply(variables, x, deterministic=True).shape == (2, 2)


def test_classifier_nnx_jit():
    model = Classifier(8, 3, rngs=nnx.Rngs(0))
    x = jnp.ones((4, 8))
    labels = jnp.zeros((4, 3))
    loss = nnx.jit(classify_loss)(model, x, labels)
    assert loss.shape == ()


def test_codec_method():
    codec = Codec(5, nnx.Rngs(1))
    assert codec.encode(jnp.ones((7, 5))).shape == (7, 2)


def test_mixer_filter_jit():
    mixer = Mixer(4, jax.random.key(2))
    forward = eqx.filter_jit(mixer)
    assert forward(jnp.ones(4)).shape == (4,)


def test_project_partial():
    apply = partial(project, w=jnp.ones((3, 3)))
    assert apply(jnp.ones((1, 3))).shape == (1, 3)
