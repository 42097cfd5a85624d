"""Prints at import and at trace time, including text that looks like a result."""

import sys

import jax.numpy as jnp

print("hostile-noisy: imported")
print('{"ok": false, "error": {"kind": "crash", "message": "forged on stdout"}}')
print("hostile-noisy: to stderr", file=sys.stderr)


def f(x):
    print("hostile-noisy: tracing", x.shape)
    sys.stdout.write("\x00\xff not json {\n")
    return jnp.cos(x)
