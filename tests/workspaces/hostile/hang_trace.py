"""Sleeps forever inside the traced function."""

import time


def f(x):
    print("hostile-hang: tracing", flush=True)
    while True:
        time.sleep(1000)
