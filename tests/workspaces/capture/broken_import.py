"""Raises at import."""

import jax

VALUE = 1


def ok(x):
    return x


raise RuntimeError("the dataset is missing")
