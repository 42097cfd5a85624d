"""Factories for the recipe: one that raises."""


def broken():
    raise ValueError("robust: the checkpoint is corrupt")


def f(x):
    return x
