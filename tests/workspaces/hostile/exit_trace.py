"""Calls os._exit while being traced: no result, no cleanup."""

import os


def f(x):
    print("hostile-exit: leaving", flush=True)
    os._exit(3)
