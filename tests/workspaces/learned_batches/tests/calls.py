"""The calls the tests make, with NumPy arrays: each returns its outputs, which the tests check."""

import jax
import numpy as np
from flax import nnx

from tagger.models import Mixer, Scaler, Tagger, masked_mean, score, unrolled


def run_all(batch: int) -> dict[str, object]:
    tokens = np.arange(batch * 4, dtype=np.int64).reshape(batch, 4) % 11  # NumPy int64
    feats = np.ones((batch, 6), dtype=np.float64)  # NumPy float64
    mask = np.arange(batch) % 2 == 0
    weights = np.ones((11, 7), dtype=np.float64)
    tagger = Tagger()
    variables = tagger.init(jax.random.key(0), tokens)
    return {
        "score": score(tokens, weights),
        "masked_mean": masked_mean(feats, mask),
        "unrolled": unrolled(feats),
        "Tagger": tagger.apply(variables, tokens),
        "Scaler": Scaler(6, rngs=nnx.Rngs(0))(feats),
        "Mixer": Mixer(6, jax.random.key(1))(feats),
    }
