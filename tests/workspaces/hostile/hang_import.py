"""Sleeps forever at import."""

import time

print("hostile-hang: importing", flush=True)
while True:
    time.sleep(1000)


def f(x):
    return x
