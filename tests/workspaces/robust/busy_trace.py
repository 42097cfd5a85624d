"""Spins the CPU forever inside the traced function."""


def f(x):
    print("robust-busy: tracing", flush=True)
    while True:
        pass
