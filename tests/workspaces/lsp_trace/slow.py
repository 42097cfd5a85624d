import os
import pathlib
import time

here = pathlib.Path(__file__).with_name("slow.pid")
first = not here.exists()
# written whole or not at all: the test reads the number as soon as the file is there
partial = here.with_name(f"slow.{os.getpid()}.tmp")
partial.write_text(str(os.getpid()))
os.replace(partial, here)
# The first import holds while the test keeps a HOLD file, so its trace can only end by being
# superseded; later imports go straight through.
while first and pathlib.Path(__file__).with_name("HOLD").exists():
    time.sleep(0.05)

import jax.numpy as jnp  # noqa: E402


def slow(x):
    return jnp.cos(x)
