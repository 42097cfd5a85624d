"""Imports a module that does not exist."""

import jaxlsp_robust_no_such_module  # noqa: F401


def f(x):
    return x
