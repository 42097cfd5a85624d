"""Is not valid Python."""


def f(x):
    return x +
